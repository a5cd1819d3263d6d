"""Faults and hostile input (issue 10): each test reproduces one finding of the fault probe on a
real tmux server, a real store and, where the finding was about the daemon, a real watcher."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import sqlite3
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from app.adapters import store
from app.adapters.llm import LLMClient, LLMSettings
from app.adapters.tmux import Tmux
from app.base.errors import LLMError, StoreError
from app.base.files import write_atomic
from app.base.inputs import Refused, check_text
from app.base.model import State
from app.base.redact import redact
from app.base.render import clean_text
from app.base.render import table as render_table
from app.base.settings import WatchSettings
from app.front.hook import main as hook_main
from app.observe.llm import LLMClassifier
from app.observe.pack_loading import load_packs
from app.run.daemon import InstanceLock
from app.run.watcher import Watcher
from tests.conftest import REPO, conductor
from tests.support.openrouter_server import OpenRouterServer, Reply
from tests.support.waiting import STARTS_WITHIN_S, retry_until, stays_false

BASH = "env -i HOME={home} TERM=screen PS1='lab$ ' bash --norc --noprofile"


def screen(pane: Any) -> str:
    return "\n".join(pane.capture_pane())


def bash_pane(session: Any, home: Path, name: str = "bash") -> Any:
    window = session.new_window(window_name=name, attach=False, start_directory=str(home),
                                window_shell=BASH.format(home=home))
    pane = window.active_pane
    retry_until(lambda: screen(pane).rstrip().endswith("lab$"), 10)
    return pane


def pty(server: Any, *args: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    return conductor("-L", server.socket_name, "pty", *args, **kwargs)


# --- 7: send cannot break out of bracketed paste -----------------------------------------------

@pytest.mark.parametrize("no_enter", [False, True], ids=["enter", "no-enter"])
def test_send_refuses_the_paste_end_marker_and_the_injected_command_never_runs(
        server: Any, session: Any, tmp_path: Path, no_enter: bool) -> None:
    pane = bash_pane(session, tmp_path)
    marker = tmp_path / "PWNED"
    hostile = f"echo harmless\x1b[201~\ntouch {marker}\n"
    args = ["send", pane.pane_id, *(["--no-enter"] if no_enter else []), "--", hostile]
    result = pty(server, *args)
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1 and "control character (U+001B" in result.stderr
    # Nothing was typed: the marker file never appears and the prompt line is still empty.
    assert stays_false(marker.exists, 1.5)
    assert "touch" not in screen(pane) and "harmless" not in screen(pane)
    # --force concerns the pane's state, not the text: still refused.
    forced = pty(server, "send", pane.pane_id, "--force", "--", hostile)
    assert forced.returncode == 1 and not marker.exists()
    # Plain text with newlines and tabs still goes through and runs.
    ok = pty(server, "send", pane.pane_id, "--", f"touch {tmp_path / 'fine'}\t")
    assert ok.returncode == 0, ok.stderr
    retry_until((tmp_path / "fine").exists, 10)


@pytest.mark.parametrize("text", [
    "a\x1b[201~b",           # bracketed-paste end
    "\x1b]0;owned\x07",      # OSC: set the terminal title
    "\x1b[2J",               # CSI: clear the screen
    "\x9b201~",              # C1 CSI
    "x\x00y", "x\x03", "x\x7f", "x\x08y", "x\ry",
], ids=["paste-end", "osc", "csi", "c1-csi", "nul", "ctrl-c", "del", "backspace", "lone-cr"])
def test_send_refuses_every_terminal_control_sequence(text: str) -> None:
    with pytest.raises(Refused, match="control character"):
        check_text(text)


def test_send_accepts_newlines_tabs_and_crlf_line_ends() -> None:
    check_text("line one\r\nline\ttwo\nthree ünïcödé ❯ ✓")


# --- 8: a runaway pattern in a user's pack -----------------------------------------------------

RUNAWAY_PACK = """\
name: slowcat
description: a user's pack with a pattern that backtracks catastrophically
detect:
  commands: [cat]
rules:
  - id: runaway
    state: BUSY
    region: {last: 5}
    match: '(a|aa)+$'
  - id: idle
    state: READY
    region: {last: 5}
    match: 'ready'
"""


@pytest.mark.slow
def test_a_runaway_user_pattern_marks_its_pane_and_the_watcher_keeps_going(
        server: Any, session: Any, tmp_path: Path, isolated_env: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    packs_dir = tmp_path / "packs"
    packs_dir.mkdir()
    (packs_dir / "slowcat.yml").write_text(RUNAWAY_PACK)
    monkeypatch.setenv("CONDUCTOR_PACKS_DIR", str(packs_dir))
    # On Python's re this line takes hours: (a|aa)+ tries every split of 70 a's.
    runaway = session.new_window(window_name="runaway", attach=False,
                                 window_shell="exec cat")
    runaway.active_pane.send_keys("a" * 70 + "!", enter=True, literal=True)
    bash_pane(session, tmp_path, "calm")
    proc = subprocess.Popen(
        [sys.executable, "-m", "app", "-L", server.socket_name, "pty", "watch", "--interval",
         "0.5", "--no-notify"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        cwd=REPO)
    try:
        def states() -> dict[str, dict[str, Any]]:
            out = pty(server, "status", "--json")
            return {w["name"]: w for w in json.loads(out.stdout or "[]")}

        retry_until(lambda: states().get("calm", {}).get("state") == "READY", 30, interval=0.3)
        retry_until(lambda: "pattern_timeout" in states().get("runaway", {}).get("reasons", []),
                    30, interval=0.3, message=f"{states()}")
        row = states()["runaway"]
        assert row["state"] == "UNKNOWN"
        assert "took over" in row["summary"] and "(a|aa)+$" in row["summary"]
        # The watcher keeps cycling: its heartbeat moves on.
        first = _last_cycle(isolated_env)
        retry_until(lambda: _last_cycle(isolated_env) > first, 10, interval=0.2)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
        _, err = proc.communicate(timeout=5)
        assert "ran out of time" in err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _last_cycle(workers: Path) -> float:
    conn = sqlite3.connect(f"file:{workers / 'status.db'}?mode=ro", uri=True)
    try:
        row = conn.execute("SELECT last_cycle_ts FROM daemon").fetchone()
        return float(row[0] or 0) if row else 0.0
    finally:
        conn.close()


# --- 9: the store never disagrees with tmux after one failed write -----------------------------

def test_a_failed_write_is_retried_and_the_store_catches_up(
        server: Any, session: Any, tmp_path: Path, isolated_env: Path) -> None:
    writer = store.StoreWriter(isolated_env)
    tmux = Tmux(socket_name=server.socket_name)
    # A real failing write: a trigger refuses every status row while "disk_full" holds a row.
    writer.conn.executescript(
        "CREATE TABLE disk_full (x); INSERT INTO disk_full VALUES (1);"
        "CREATE TRIGGER full_i BEFORE INSERT ON status WHEN (SELECT COUNT(*) FROM disk_full) "
        "BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END;"
        "CREATE TRIGGER full_u BEFORE UPDATE ON status WHEN (SELECT COUNT(*) FROM disk_full) "
        "BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END;")
    watcher = Watcher(tmux, writer, load_packs(), WatchSettings(interval_s=0.2, stable_polls=1,
                                                                ready_min_s=0))
    notified: list[str] = []
    watcher.on_transition = lambda t, tracked: notified.append(t.state.value)
    pane = bash_pane(session, tmp_path, "shell")
    with pytest.raises(StoreError, match="disk is full"):
        for _ in range(50):
            watcher.tick()
    # Space comes back: the next cycles write every row and the transition they missed.
    writer.conn.execute("DELETE FROM disk_full")

    def stored_state() -> str | None:
        watcher.tick()
        row = writer.conn.execute(
            "SELECT s.state FROM status s JOIN ptys p ON p.id = s.id WHERE p.pane_id = ?",
            (pane.pane_id,)).fetchone()
        return row[0] if row else None

    retry_until(lambda: stored_state() == "READY", 10, interval=0.1)
    wid = next(w for w, t in watcher.tracked.items() if t.pane.pane_id == pane.pane_id)
    history = [r[0] for r in writer.conn.execute(
        "SELECT state FROM status_history WHERE id = ? ORDER BY seq", (wid,))]
    assert "READY" in history
    # Told once the pane's first state has held (a pane's first seconds are not news).
    retry_until(lambda: watcher.tick() is not None and "READY" in notified, 10, interval=0.1)
    assert json.loads((isolated_env / wid / "status.json").read_text())["state"] == "READY"
    writer.close()


def test_a_setting_too_big_for_sqlite_fails_one_prune_and_not_every_row(
        server: Any, session: Any, tmp_path: Path, isolated_env: Path) -> None:
    writer = store.StoreWriter(isolated_env)
    settings = WatchSettings(interval_s=0.2, history_rows_per_pane=10**30, stable_polls=1,
                             ready_min_s=0)
    watcher = Watcher(Tmux(socket_name=server.socket_name), writer, load_packs(), settings)
    bash_pane(session, tmp_path, "shell")
    retry_until(lambda: watcher.tick() is not None and any(
        t.assessment is not None and t.assessment.state is State.READY
        for t in watcher.tracked.values()), 10, interval=0.1)
    names = {r[0] for r in writer.conn.execute(
        "SELECT p.name FROM status s JOIN ptys p ON p.id = s.id")}
    assert "shell" in names
    writer.close()


# --- 11: concurrent hooks on a store that does not exist yet -----------------------------------

def test_concurrent_hooks_on_a_new_store_lose_no_event(tmp_path: Path) -> None:
    for round_ in range(2):
        workers = tmp_path / f"store{round_}"
        env = {**os.environ, "CONDUCTOR_WORKERS_DIR": str(workers),
               "TMUX": "/tmp/tmux-0/default,4242,0"}
        procs = []
        for i in range(12):
            payload = json.dumps({"session_id": f"s{i}", "transcript_path": "/tmp/t.jsonl",
                                  "cwd": "/tmp", "hook_event_name": "Stop"})
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "app", "pty", "hook", "--cli", "claude", payload],
                env={**env, "TMUX_PANE": f"%{i}"}, cwd=REPO, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, text=True))
        for proc in procs:
            out, err = proc.communicate(timeout=60)
            assert (proc.returncode, out, err) == (0, "", "")
        conn = sqlite3.connect(workers / "status.db")
        panes = sorted(r[0] for r in conn.execute("SELECT pane_id FROM events"))
        conn.close()
        log = workers / "hook.log"
        assert panes == sorted(f"%{i}" for i in range(12)), \
            log.read_text() if log.exists() else "no hook.log"


# --- 12: a private store folder, and nothing opened through a link ------------------------------

def _mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def test_the_store_is_private(server: Any, session: Any, tmp_path: Path,
                              isolated_env: Path) -> None:
    writer = store.StoreWriter(isolated_env)
    watcher = Watcher(Tmux(socket_name=server.socket_name), writer, load_packs(),
                      WatchSettings(interval_s=0.2))
    bash_pane(session, tmp_path)
    watcher.tick()
    lock = InstanceLock(isolated_env / "watch.lock")
    lock.acquire()
    hook_main(["not json"], env={"CONDUCTOR_WORKERS_DIR": str(isolated_env)})
    assert _mode(isolated_env) == 0o700
    files = ["status.db", "status.db-wal", "status.db-shm", "hook.log", "watch.lock",
             "store.lock"]
    assert {name: oct(_mode(isolated_env / name)) for name in files} == \
        {name: oct(0o600) for name in files}
    for wid in watcher.tracked:
        assert _mode(isolated_env / wid) == 0o700
        assert _mode(isolated_env / wid / "status.json") == 0o600
    lock.release()
    writer.close()


def test_links_planted_in_the_store_are_never_followed(
        server: Any, session: Any, tmp_path: Path, isolated_env: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    isolated_env.mkdir(mode=0o700)
    (isolated_env / "watch.lock").symlink_to(victim)
    (isolated_env / "hook.log").symlink_to(victim)
    with pytest.raises(StoreError, match="symbolic link"):
        InstanceLock(isolated_env / "watch.lock").acquire()
    hook_main(["not json"], env={"CONDUCTOR_WORKERS_DIR": str(isolated_env)})
    assert victim.read_text() == "precious\n"

    # A pane's folder swapped for a link: status.json is not written through it.
    writer = store.StoreWriter(isolated_env)
    watcher = Watcher(Tmux(socket_name=server.socket_name), writer, load_packs(),
                      WatchSettings(interval_s=0.2, stable_polls=1, ready_min_s=0))
    pane = bash_pane(session, tmp_path)
    watcher.tick()
    wid = next(w for w, t in watcher.tracked.items() if t.pane.pane_id == pane.pane_id)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shutil.rmtree(isolated_env / wid)
    (isolated_env / wid).symlink_to(elsewhere)
    pane.send_keys("echo moved", enter=True)
    retry_until(lambda: watcher.tick() is not None and
                "moved" in watcher.tracked[wid].text, 10, interval=0.1)
    assert list(elsewhere.iterdir()) == []
    writer.close()

    # The owner of a linked file is not copied onto our replacement.
    target = tmp_path / "owned-by-nobody.json"
    target.write_text("{}")
    os.chown(target, 65534, 65534)
    link = tmp_path / "status.json"
    link.symlink_to(target)
    write_atomic(link, "{}\n", mode=0o600)
    assert not link.is_symlink() and link.stat().st_uid == os.getuid()
    assert target.read_text() == "{}"


# --- 16: readers on a read-only mount, and as another user -------------------------------------

def _can_mount() -> bool:
    return os.geteuid() == 0 and shutil.which("mount") is not None


@pytest.mark.skipif(not _can_mount(), reason="needs root to bind-mount a read-only store")
@pytest.mark.parametrize("writer_open", [True, False], ids=["watcher-running", "watcher-gone"])
def test_readers_read_a_store_on_a_read_only_mount(tmp_path: Path, isolated_env: Path,
                                                   writer_open: bool) -> None:
    writer = store.StoreWriter(isolated_env)
    with writer.transaction() as conn:
        writer.upsert_pty(conn, {"id": "abc", "name": "api", "pane_id": "%1"})
        writer.upsert_status(conn, [{"id": "abc", "state": "READY", "summary": "idle"}])
        writer.heartbeat(conn, pid=os.getpid(), last_cycle_ts=time.time())
    if not writer_open:
        writer.close()
    mounted = tmp_path / "ro"
    mounted.mkdir()
    bound = subprocess.run(["mount", "--bind", str(isolated_env), str(mounted)], check=False,
                           capture_output=True)
    if bound.returncode != 0:
        writer.close()
        pytest.skip(f"bind mount refused: {bound.stderr!r}")
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", str(mounted)], check=True)
        result = conductor("--workers-dir", str(mounted), "pty", "status", "--json")
        assert result.returncode == 0, result.stderr
        assert [(w["name"], w["state"]) for w in json.loads(result.stdout)] == [("api", "READY")]
        short = conductor("pty", "status", "--short",
                          env={"CONDUCTOR_WORKERS_DIR": str(mounted)})
        assert "no store" not in short.stdout and "unreadable" not in short.stdout
    finally:
        subprocess.run(["umount", str(mounted)], check=False)
        if writer_open:
            writer.close()


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None,
                    reason="needs root to run the reader as nobody")
def test_another_user_is_told_the_store_is_unreadable_not_missing(tmp_path: Path) -> None:
    workers = tmp_path / "store"
    store.StoreWriter(workers).close()
    tmp_path.chmod(0o755)  # nobody may reach the folder; the folder itself stays private
    result = subprocess.run(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-S",
         "-c", "import sys; from app.adapters.status import short_line;"
         " print(short_line(sys.argv[1]))", str(workers)],
        # -S skips the editable install's .pth; `-c` puts the working folder, the checkout, first
        cwd=REPO, capture_output=True, text=True, timeout=30, check=False)
    assert result.stdout.strip() == "[conductor: store unreadable]", result.stderr


# --- 13: a store from a newer release ----------------------------------------------------------

@pytest.mark.parametrize("change", [
    "INSERT INTO _sqlite_migrations (migration_set, name, applied_at) "
    "VALUES ('conductor_pty', 'm099_future', 'x')",
    "INSERT INTO status (id, state) VALUES ('x', 'HIBERNATING')",
], ids=["unknown-migration", "unknown-state"])
def test_a_store_from_a_newer_release_is_refused_in_one_line(
        server: Any, isolated_env: Path, change: str) -> None:
    store.StoreWriter(isolated_env).close()
    conn = sqlite3.connect(isolated_env / "status.db")
    conn.execute(change)
    conn.commit()
    conn.close()
    result = pty(server, "watch", "--once", "--no-notify")
    assert result.returncode == 1
    assert result.stderr.startswith("Error: status store") and "newer conductor pty" in \
        result.stderr and result.stderr.count("\n") == 1


# --- 10: readers say when the states are stale --------------------------------------------------

@pytest.mark.slow
def test_readers_say_stale_when_the_watcher_is_hung(
        server: Any, session: Any, tmp_path: Path, isolated_env: Path,
        watcher_process: Any) -> None:
    bash_pane(session, tmp_path)
    proc = watcher_process("--interval", "0.3", "--no-notify")
    retry_until(lambda: "READY" in pty(server, "status", "--short").stdout, STARTS_WITHIN_S,
                interval=0.2)
    assert pty(server, "status").stderr == ""
    proc.send_signal(signal.SIGSTOP)  # hung: alive, but no cycle finishes
    try:
        # Two minutes without a cycle, as seen by readers (the watcher itself is frozen).
        conn = sqlite3.connect(isolated_env / "status.db")
        conn.execute("UPDATE daemon SET last_cycle_ts = ?", (time.time() - 125,))
        conn.commit()
        conn.close()
        short = pty(server, "status", "--short")
        assert short.stdout.strip() == "[conductor: stale 2m]"
        table = pty(server, "status")
        assert "stale: the watcher's last cycle was 2m0" in table.stderr
        rows = json.loads(pty(server, "status", "--json").stdout)
        assert rows and all(r["stale"] and r["stale_s"] >= 125 for r in rows)
    finally:
        proc.send_signal(signal.SIGCONT)
    # Once it runs again, the next cycle makes the states fresh.
    retry_until(lambda: "stale" not in pty(server, "status", "--short").stdout, 20,
                interval=0.2)
    assert not json.loads(pty(server, "status", "--json").stdout)[0]["stale"]


# --- 14: terminal escapes from outside never reach the store or a terminal ---------------------

HOSTILE_SUMMARY = "\x1b]0;owned\x07Asks to \x1b[2Jship\x9b31m \u202eit\x00"


@pytest.mark.slow
def test_an_llm_summary_with_escapes_is_stored_and_printed_clean(
        server: Any, session: Any, watcher_process: Any, isolated_env: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    with OpenRouterServer(default=Reply.verdict("NEEDS_CONFIRMATION", HOSTILE_SUMMARY,
                                                "\x1b[31manswer\x1b[0m")) as llm:
        monkeypatch.setenv("OPENROUTER_API_KEY", "sk-or-v1-" + "ab" * 24)
        monkeypatch.setenv("OPENROUTER_BASE_URL", llm.base_url)
        session.new_window(window_name="deploy", attach=False, window_shell=(
            "sh -c 'printf \"Ship it to production now?\\n\"; sleep 600'"))
        watcher_process("--interval", "0.3", "--no-notify")

        def deploy() -> dict[str, Any]:
            done = pty(server, "status", "--json")
            rows = json.loads(done.stdout) if done.returncode == 0 else []
            return next((w for w in rows if w["name"] == "deploy"), {})

        retry_until(lambda: deploy().get("state") == "NEEDS_CONFIRMATION", 20, interval=0.2)
    row = deploy()
    assert row["summary"] == "Asks to ship it"
    assert row["actions_needed"] == "answer"
    on_disk = (isolated_env / row["id"] / "status.json").read_text()
    assert "\\u001b" not in on_disk and "\x1b" not in on_disk
    for argv in (["tail", row["id"]], ["status"]):
        printed = pty(server, *argv)
        assert printed.returncode == 0
        assert "Asks to ship it" in printed.stdout
        assert not any((ord(c) < 0x20 and c != "\n") or 0x7F <= ord(c) <= 0x9F
                       for c in printed.stdout), repr(printed.stdout)


@pytest.mark.parametrize("text, clean", [
    ("a\x1b]0;title\x07b", "ab"),
    ("x\x1b[2Jy", "xy"),
    ("p\x1b]8;;http://e\x1b\\link\x1b]8;;\x1b\\q", "plinkq"),
    ("t\x07\x00\x7f\u202eevil", "tevil"),
    ("\x9b31mred", "red"),
    ("two\nlines\tand tab", "two lines and tab"),
    ("ünïcödé ❯ ✓", "ünïcödé ❯ ✓"),
], ids=["osc-title", "csi-clear", "osc8-link", "controls-bidi", "c1-csi", "newline-tab",
        "unicode"])
def test_clean_text_leaves_only_printable_text(text: str, clean: str) -> None:
    assert clean_text(text) == clean


# --- 15: redaction gaps, and no redirects for the LLM client -----------------------------------

KEY = "sk-or-v1-" + "0123456789abcdef" * 4


@pytest.mark.parametrize("screen, secret", [
    ("$ psql postgres://admin:hunter2pw@db:5432/app", "hunter2pw"),
    ("$ git clone https://bob:s3cr3tTok@example.com/x.git", "s3cr3tTok"),
    ("$ mysql --password hunter2pw -u root", "hunter2pw"),
    ("$ deploy --api-key 'abc def ghi'", "abc def ghi"),
    ("GITLAB_TOKEN glpat-abcdefghij0123456789xyz", "glpat-abcdefghij0123456789xyz"),
    ("maps key AIzaSyA1234567890abcdefghijklmnopqrstuv in use",
     "AIzaSyA1234567890abcdefghijklmnopqrstuv"),
    (f"export OPENROUTER_KEY={KEY[:30]}\n{KEY[30:]}\n❯ ", KEY[30:]),
    (f"echo {KEY[:14]}\n{KEY[14:44]}\n{KEY[44:]}\n$ ", KEY[14:44]),
], ids=["postgres-url", "https-url", "password-flag", "api-key-flag", "gitlab", "google",
        "wrapped-key", "wrapped-three-lines"])
def test_redaction_closes_the_probe_gaps(screen: str, secret: str) -> None:
    out = redact(screen)
    assert secret not in out
    assert out.count("\n") == screen.count("\n")  # the screen keeps its shape
    assert out.splitlines()[-1] == screen.splitlines()[-1] or "[REDACTED]" in out


def test_prose_and_prompts_survive_redaction() -> None:
    # "tokens: 12k" counts tokens; "token: 12k" could be one, and is masked.
    screen = ("Used 1.2k tokens\n--token-limit\nssh user@host\nhttps://example.com/a@b\n"
              "tokens: 12k\ntoken: 12k\n❯ ")
    assert redact(screen) == screen.replace("token: 12k", "token: [REDACTED]")


def test_the_llm_client_follows_no_redirect() -> None:
    moved = Reply(status=307, headers=(("Location", "/v1/chat/completions"),), body="")
    with OpenRouterServer(default=moved) as srv:
        llm = LLMClassifier(LLMClient(LLMSettings(api_key=KEY, base_url=srv.base_url,
                                                  timeout=5.0, max_retries=0)))
        try:
            with pytest.raises(LLMError, match=r"redirect .*not followed"):
                llm.classify("Ship it to production now?\n", "generic")
        finally:
            llm.close()
        assert srv.count == 1  # requests would have made 31


# --- 4, 5, 13, 6: bad input is one line, exit 2 (usage) or 1, never a traceback ------------

class BadInput(NamedTuple):
    argv: tuple[str, ...]
    says: str
    code: int = 2  # the command line itself is wrong; 1: it is well formed, and refused


BAD_INPUTS = {
    "watch-interval-inf": BadInput(("watch", "--once", "--interval", "inf"), "'inf' is not a"),
    "watch-interval-nan": BadInput(("watch", "--once", "--interval", "nan"), "'nan' is not a"),
    "watch-interval-1e309": BadInput(("watch", "--once", "--interval", "1e309"), "'1e309'"),
    "watch-interval-0": BadInput(("watch", "--once", "--interval", "0"), "at least 0.05"),
    "watch-interval-negative": BadInput(("watch", "--once", "--interval", "-1"), "'-1'"),
    "status-watch-nan": BadInput(("status", "--watch", "--interval", "nan"), "'nan'"),
    "status-watch-inf": BadInput(("status", "--watch", "--interval", "inf"), "'inf'"),
    "wait-poll-nan": BadInput(("wait", "%0", "--poll", "nan", "--timeout", "1"), "'nan'"),
    "wait-timeout-nan": BadInput(("wait", "%0", "--timeout", "nan"), "'nan'"),
    "tail-huge-n": BadInput(("tail", "x", "-n", "9" * 20), "not in the range"),
    "create-100kb-path": BadInput(("create", "/tmp/" + "a/" * 50_000), "path is too long", 1),
    "create-name-newline": BadInput(("create", "/tmp", "--name", "bad\nname"), "--name must", 1),
    "create-name-escape": BadInput(("create", "/tmp", "--name", "x\x1b]0;t\x07"), "--name must",
                                   1),
    "short-with-watch": BadInput(("status", "--short", "--watch"), "cannot be combined"),
    # A group without its command: which commands it has, not its whole help on one line.
    "budget-no-command": BadInput(("budget",), "conductor pty budget needs a command: reset ("),
    "herd-no-command": BadInput(("herd",), "conductor pty herd needs a command: "),
    "watch-store-under-a-file": BadInput(("watch", "--once"), "Not a directory", 1),
    "hooks-deeply-nested-json": BadInput(("hooks", "install", "--cli", "claude"),
                                         "nested too deeply", 1),
}


@pytest.mark.parametrize("case", BAD_INPUTS.values(), ids=BAD_INPUTS.keys())
def test_bad_input_is_one_line_and_exit_2_or_1(server: Any, session: Any, tmp_path: Path,
                                               case: BadInput) -> None:
    env: dict[str, str] = {}
    argv = case.argv
    if argv[0] == "watch" and "--interval" not in argv:
        plain = tmp_path / "plain-file"
        plain.write_text("")
        env["CONDUCTOR_WORKERS_DIR"] = str(plain / "workers")
    if argv[0] == "hooks":
        deep = tmp_path / "settings.json"
        deep.write_text("[" * 5000 + "]" * 5000)
        argv = (*argv, "--path", str(deep))
    result = pty(server, *argv, env=env)
    assert result.returncode == case.code, result
    assert result.stderr.startswith("Error: ") and result.stderr.count("\n") == 1, result.stderr
    assert case.says in result.stderr
    assert len(result.stderr) < 400
    if argv[0] == "create":
        names = server.cmd("list-windows", "-a", "-F", "#{window_name}").stdout
        assert not any("bad" in name or "\x1b" in name for name in names)


@pytest.mark.skipif(not _can_mount(), reason="needs root to bind-mount a read-only store")
def test_watch_on_a_read_only_store_is_one_line(server: Any, tmp_path: Path,
                                                isolated_env: Path) -> None:
    store.StoreWriter(isolated_env).close()
    mounted = tmp_path / "ro"
    mounted.mkdir()
    if subprocess.run(["mount", "--bind", str(isolated_env), str(mounted)],
                      check=False).returncode != 0:
        pytest.skip("bind mount refused")
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", str(mounted)], check=True)
        result = pty(server, "watch", "--once", env={"CONDUCTOR_WORKERS_DIR": str(mounted)})
        assert result.returncode == 1
        assert result.stderr.startswith("Error: cannot use the status store folder") and \
            "Read-only file system" in result.stderr and result.stderr.count("\n") == 1
    finally:
        subprocess.run(["umount", str(mounted)], check=False)


def test_classify_of_several_files_prints_text_unless_json(tmp_path: Path) -> None:
    first, second = tmp_path / "a.txt", tmp_path / "b.txt"
    first.write_text("lab$ ls\nx\nlab$ \n")
    second.write_text("Continue? (y/N) \n")
    text = conductor("pty", "classify", str(first), str(second), "--cli", "shell")
    assert text.returncode == 0
    lines = text.stdout.splitlines()
    assert lines[0].startswith(f"{first}: READY") and any(
        line.startswith(f"{second}: NEEDS_CONFIRMATION") for line in lines)
    as_json = conductor("pty", "classify", str(first), str(second), "--cli", "shell", "--json")
    assert [json.loads(line)["state"] for line in as_json.stdout.splitlines()] == \
        ["READY", "NEEDS_CONFIRMATION"]


def test_the_status_table_is_cut_to_the_terminal_width() -> None:
    worker = {"id": "abc", "name": "api", "cli_type": "shell", "state": "BUSY",
              "summary": "x" * 300}
    lines = render_table([worker], time.time(), 120.0, 60).splitlines()
    assert all(len(line) <= 60 for line in lines) and lines[1].endswith("…")
    assert len(render_table([worker], time.time(), 120.0).splitlines()[1]) > 60


def test_a_wait_that_times_out_says_how_long_the_pane_has_been_busy(
        server: Any, session: Any, tmp_path: Path, isolated_env: Path) -> None:
    window = session.new_window(window_name="busy", attach=False, window_shell=(
        "sh -c 'while :; do date +%s%N; sleep 0.2; done'"))
    pane = window.active_pane
    retry_until(lambda: len(screen(pane).split()) > 2, 10)
    result = pty(server, "wait", pane.pane_id, "--timeout", "3")
    assert result.returncode == 124
    # The pane was BUSY for the whole wait: at least the 3 s waited, never "0s".
    seconds = int(result.stderr.split(" is BUSY for ")[1].split("s")[0])
    assert seconds >= 3, result.stderr
    # The watcher saw it BUSY for ten minutes: wait says so rather than its own few seconds.
    writer = store.StoreWriter(isolated_env)
    watcher = Watcher(Tmux(socket_name=server.socket_name), writer, load_packs(),
                      WatchSettings(interval_s=0.2))
    retry_until(lambda: watcher.tick() is not None and any(
        t.assessment is not None and t.assessment.state is State.BUSY and t.pane.pane_id ==
        pane.pane_id for t in watcher.tracked.values()), 10, interval=0.2)
    with writer.transaction() as conn:
        conn.execute("UPDATE status SET state_entered_ts = ?", (time.time() - 600,))
    writer.close()
    started = time.time()
    result = pty(server, "wait", pane.pane_id, "--timeout", "1")
    took = time.time() - started  # the CLI's start included: seconds on a loaded machine
    told = re.search(r" is BUSY for (\d+)m(\d+)s", result.stderr)
    assert result.returncode == 124 and told is not None, result.stderr
    assert 600 <= int(told[1]) * 60 + int(told[2]) <= 600 + took + 1, result.stderr


def test_a_window_renamed_with_a_newline_is_still_listed_and_watched(
        server: Any, session: Any, tmp_path: Path, isolated_env: Path) -> None:
    pane = bash_pane(session, tmp_path, "plain")
    server.cmd("rename-window", "-t", pane.window_id, "two\nlines")
    listing = Tmux(socket_name=server.socket_name).list_panes()
    named = {p.pane_id: p.window_name for p in listing.panes}
    # tmux 3.3 prints the newline escaped (two\\nlines); older ones print it raw, and the
    # listing joins that row back together.
    assert named[pane.pane_id] in ("two\nlines", "two\\nlines")
    writer = store.StoreWriter(isolated_env)
    watcher = Watcher(Tmux(socket_name=server.socket_name), writer, load_packs(),
                      WatchSettings(interval_s=0.2))
    watcher.tick()
    assert any(t.pane.pane_id == pane.pane_id for t in watcher.tracked.values())
    writer.close()
    table = pty(server, "status")
    assert any("two" in line and "lines" in line for line in table.stdout.splitlines())


def test_the_store_knows_every_state_of_the_model() -> None:
    # A state missing here would make the watcher refuse its own store as "from a newer release".
    assert set(store.KNOWN_STATES) == {s.value for s in State}
