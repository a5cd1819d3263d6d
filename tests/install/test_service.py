"""Keeping the watcher running: its log file and `logs`, `stop`, and the service units.

A real `systemd --user` is rarely reachable in a container, so units are checked with
`systemd-analyze verify` (the same parser systemd uses) where that tool exists.
"""

from __future__ import annotations

import functools
import itertools
import logging
import plistlib
import shutil
import stat
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from app.adapters import watchfiles
from tests.conftest import REPO, conductor
from tests.support.waiting import retry_until


def user_systemd_reachable() -> bool:
    if shutil.which("systemctl") is None:
        return False
    done = subprocess.run(["systemctl", "--user", "is-system-running"], capture_output=True,
                          text=True, timeout=30, check=False)
    return done.stdout.strip() in ("running", "degraded", "starting")


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    return home


@pytest.mark.slow
def test_the_watcher_logs_to_its_store_and_stop_ends_it_cleanly(
        server: Any, session: Any, watcher_process: Any, isolated_env: Path, home: Path) -> None:
    proc = watcher_process("--interval", "0.3", "--quiet")
    log = isolated_env / "watch.log"
    retry_until(lambda: watchfiles.running_pid(isolated_env) == proc.pid, 20)
    retry_until(lambda: log.exists() and "watching tmux server" in log.read_text(), 20)
    assert stat.S_IMODE(log.stat().st_mode) == 0o600

    follower = subprocess.Popen([sys.executable, "-m", "app", "pty", "logs", "-f", "-n", "1"],
                                stdout=subprocess.PIPE, text=True, cwd=REPO)
    try:
        assert follower.stdout is not None
        # The last line shown: `logs` is up (however slowly it started), and follows from there.
        assert follower.stdout.readline()
        session.new_window(window_name="fresh", attach=False)
        # Even with --quiet on stderr, the file gets every transition.
        line = follower.stdout.readline()
        while "fresh" not in line:
            line = follower.stdout.readline()
            assert line, "logs -f stopped"
        assert "fresh (" in line and "-> " in line
    finally:
        follower.terminate()
        follower.wait(timeout=10)

    if not user_systemd_reachable():
        # A service installed while a watcher runs would only retry and give up: say so.
        installed = conductor("pty", "service", "install", "--kind", "systemd")
        assert installed.stderr.startswith(f"note: a watcher (pid {proc.pid}) already runs")

    shown = conductor("pty", "logs", "-n", "3")
    assert shown.returncode == 0 and len(shown.stdout.splitlines()) == 3

    done = conductor("pty", "stop")
    assert (done.returncode, done.stdout.strip()) == (0, f"stopped the watcher (pid {proc.pid})")
    assert proc.wait(timeout=10) == 0
    assert "stopped" in log.read_text().splitlines()[-1]
    assert conductor("pty", "status", "--short").stdout.strip() == "[conductor: watcher stopped]"

    again = conductor("pty", "watch", "--stop")
    assert again.returncode == 1
    assert again.stderr.strip() == f"Error: no watcher is running for {isolated_env}"


def test_logs_before_any_watcher_is_one_clear_line(isolated_env: Path) -> None:
    done = conductor("pty", "logs")
    assert done.returncode == 1
    assert done.stderr.strip() == (f"Error: no watcher log at {isolated_env / 'watch.log'} yet: "
                                   "start `conductor pty watch`")


def test_the_log_holds_no_secret_and_no_escape_even_in_a_traceback(tmp_path: Path) -> None:
    handler = watchfiles.log_handler(tmp_path)
    logger = logging.getLogger("test.safe")
    logger.propagate = False
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    check = "mysql -pHunter2pass shop \x1b]0;owned\x07\u202e"
    try:
        logger.info("cycle api: running %s", check)
        try:
            raise ValueError(f"bad check {check}")
        except ValueError:
            logger.exception("cycle failed")
    finally:
        logger.removeHandler(handler)
        handler.close()
    text = (tmp_path / watchfiles.LOG_NAME).read_text(encoding="utf-8")
    assert "running mysql -p[REDACTED] shop" in text
    assert "ValueError: bad check mysql -p[REDACTED] shop" in text  # the traceback's last line
    assert "Hunter2pass" not in text
    assert not {"\x1b", "\x07", "\u202e"} & set(text)
    assert text.count("\n") > 3  # a traceback keeps its lines


def test_the_log_rotates_privately_and_follow_keeps_reading_across_rotations(
        tmp_path: Path) -> None:
    handler = watchfiles.log_handler(tmp_path)
    handler.maxBytes = 300
    logger = logging.getLogger("test.rotation")
    logger.propagate = False
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.info("before following")
    seen: list[str] = []
    done = threading.Event()

    def follow() -> None:
        for line in watchfiles.follow_log(tmp_path, poll_s=0.02, stop=done.is_set):
            seen.append(line)

    def shown(text: str) -> bool:
        return any(text in s for s in seen)

    reader = threading.Thread(target=follow)
    reader.start()
    try:
        retry_until(lambda: reader.is_alive(), 5)
        # follow_log starts at the end of the file; give it a moment to open it, then write.
        def probe_seen() -> bool:
            logger.info("probe")
            return any("probe" in s for s in seen)

        retry_until(probe_seen, 10, interval=0.1)
        # One line at a time, as a watcher writes: several rotations between two looks lose the
        # files in between (as `tail -F` would), which a 1 MB log never does in half a second.
        for n in range(30):
            logger.info("line %02d of the test", n)
            retry_until(functools.partial(shown, f"line {n:02d}"), 10)
    finally:
        done.set()
        reader.join(timeout=10)
        logger.removeHandler(handler)
        handler.close()
    numbered = [s.split("line ")[1][:2] for s in seen if "of the test" in s]
    assert numbered == [f"{n:02d}" for n in range(30)]
    assert not any("before following" in s for s in seen)
    rotated = sorted(p.name for p in tmp_path.iterdir())
    assert rotated == ["watch.log", "watch.log.1", "watch.log.2", "watch.log.3"]
    assert {stat.S_IMODE((tmp_path / n).stat().st_mode) for n in rotated} == {0o600}


def test_logs_follow_goes_on_from_the_very_line_its_tail_ended(tmp_path: Path) -> None:
    log = tmp_path / "watch.log"
    log.write_bytes(b"one\ntwo\nthr")  # the last line still being written
    shown, start = watchfiles.read_log_at(tmp_path, 5)
    assert shown == ["one", "two"]
    with log.open("ab") as handle:  # written between the tail and the follow
        handle.write(b"ee\nfour\n")
    assert list(itertools.islice(watchfiles.follow_log(tmp_path, poll_s=0.02, start=start),
                                 2)) == ["three", "four"]

    # Rotated in between: the new file is all news.
    log.rename(tmp_path / "watch.log.1")
    log.write_bytes(b"five\n")
    assert next(watchfiles.follow_log(tmp_path, poll_s=0.02, start=start)) == "five"


def test_the_log_is_never_written_through_a_symlink(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.write_text("")
    store = tmp_path / "store"
    store.mkdir()
    (store / "watch.log").symlink_to(target)
    with pytest.raises(OSError):
        watchfiles.log_handler(store)
    assert target.read_text() == ""


def verify(unit: Path) -> None:
    if shutil.which("systemd-analyze") is None:
        pytest.skip("systemd-analyze is not installed here: the unit's syntax was not checked")
    done = subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert unit.name not in done.stderr, done.stderr  # verify warns about the unit on stderr


def test_service_install_writes_a_unit_systemd_accepts(home: Path, tmp_path: Path) -> None:
    # A store path with a space, a systemd specifier and a variable: each must stay literal.
    store = tmp_path / "my store %h $HOME"
    done = conductor("--workers-dir", str(store), "-L", "work", "pty", "service", "install",
                     "--kind", "systemd", "--no-start",
                     env={"OPENROUTER_API_KEY": "sk-or-v1-secretsecret"})
    assert done.returncode == 0, done.stderr
    unit = home / ".config" / "systemd" / "user" / "conductor-pty.service"
    assert done.stdout.strip() == f"wrote {unit}"
    text = unit.read_text()
    assert "secretsecret" not in text
    exec_start = next(line for line in text.splitlines() if line.startswith("ExecStart="))
    conductor_bin = REPO / ".venv" / "bin" / "conductor"
    program = str(conductor_bin) if conductor_bin.exists() else f"{sys.executable} -m app"
    assert exec_start == (f'ExecStart={program} --workers-dir "{tmp_path}/my store %%h $$HOME" '
                          "-L work pty watch")
    assert "Restart=on-failure" in text
    assert f"Environment=PATH={Path(shutil.which('tmux') or '/usr/bin/tmux').parent}:" in text
    verify(unit)


def test_service_install_that_cannot_start_says_how_in_one_line(home: Path) -> None:
    if user_systemd_reachable():
        pytest.skip("a real user systemd runs here; this test does not touch it")
    done = conductor("pty", "service", "install", "--kind", "systemd")
    assert done.returncode == 1
    unit = home / ".config" / "systemd" / "user" / "conductor-pty.service"
    assert unit.exists()
    [line] = done.stderr.strip().splitlines()
    assert line.startswith(f"Error: wrote {unit} but could not start it (")
    assert line.endswith("start it with: systemctl --user enable --now conductor-pty.service")


def test_service_uninstall_and_status(home: Path, isolated_env: Path) -> None:
    status = conductor("pty", "service", "status", "--kind", "systemd")
    unit = home / ".config" / "systemd" / "user" / "conductor-pty.service"
    assert status.returncode == 0
    assert status.stdout.splitlines() == [f"service file: none ({unit})",
                                          f"watcher for {isolated_env}: not running"]
    assert conductor("pty", "service", "install", "--kind", "systemd",
                     "--no-start").returncode == 0
    assert conductor("pty", "service", "status", "--kind", "systemd").stdout.startswith(
        f"service file: {unit}\nsystemd says: ")

    done = conductor("pty", "service", "uninstall", "--kind", "systemd")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == f"removed {unit}"
    assert not unit.exists()
    again = conductor("pty", "service", "uninstall", "--kind", "systemd")
    assert (again.returncode, again.stderr.strip()) == (
        1, f"Error: no conductor pty service installed ({unit} does not exist)")


def test_the_launchd_agent_runs_the_same_watcher_and_restarts_only_on_failure(
        home: Path, tmp_path: Path) -> None:
    done = conductor("--workers-dir", str(tmp_path / "store"), "pty", "service", "install",
                     "--kind", "launchd", "--print")
    assert done.returncode == 0, done.stderr
    header, body = done.stdout.split("\n", 1)
    assert header == f"# {home}/Library/LaunchAgents/dev.conductor-pty.watch.plist"
    agent = plistlib.loads(body.encode())
    assert agent["Label"] == "dev.conductor-pty.watch"
    assert agent["ProgramArguments"][-4:] == ["--workers-dir", str(tmp_path / "store"), "pty",
                                              "watch"]
    assert agent["KeepAlive"] == {"SuccessfulExit": False} and agent["RunAtLoad"] is True
    assert not (home / "Library").exists()  # --print writes nothing
