"""Shared fixtures: every test gets its own store folder and, where it needs one, its own tmux
server on a random socket (libtmux's pytest plugin) and its own D-Bus session bus; nothing
touches the user's tmux, desktop or state."""

from __future__ import annotations

import compileall
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.adapters.notify import Notifier
from app.adapters.notify_settings import COMMAND, NotifySettings
from app.adapters.store import StoreWriter
from app.adapters.tmux import Tmux
from app.base.settings import WatchSettings
from app.observe.pack_loading import load_packs
from app.run.daemon import _notify_with
from app.run.watcher import Watcher
from tests.support.agents import AgentUnavailable, ClaudeInTmux, Install, install_claude
from tests.support.dbus_notifications import BusUnavailable, NotificationBus
from tests.support.tmux_sockets import ENV as TMUX_TMPDIR
from tests.support.tmux_sockets import leftovers
from tests.support.waiting import stop_process

REPO = Path(__file__).resolve().parent.parent


# --- tmux sockets: the run gets a folder of its own, and must leave it empty ------------------


def _is_xdist_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def pytest_configure(config: pytest.Config) -> None:
    """Give the run its own TMUX_TMPDIR before xdist starts its workers (they inherit it), so the
    sockets found there at the end are this run's and no other's on the machine."""
    if _is_xdist_worker(config):
        return
    # Short and under /tmp: a unix socket's path has room for ~100 bytes.
    os.environ[TMUX_TMPDIR] = tempfile.mkdtemp(prefix="cpty-tmux-", dir="/tmp")
    _bytecode_for_the_run()


def _bytecode_for_the_run() -> None:
    """Under PYTHONDONTWRITEBYTECODE every `conductor` the tests start (hundreds: the CLI, the
    watchers, the agents' hooks) compiled each of our modules it imports afresh, about half of a
    CLI start's CPU. Compiled once here instead, as a checkout's first run would have written it
    (the stdlib and the venv's packages have theirs from their install)."""
    if os.environ.get("PYTHONDONTWRITEBYTECODE"):
        compileall.compile_dir(REPO / "app", quiet=1)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The modules holding end-to-end tests (real agents, daemons, venvs: a minute each at
    times) run first, whole, so that the run does not end on one worker finishing them alone
    while the others are done; the order within each group is unchanged."""
    long_modules = {item.path for item in items
                    if item.get_closest_marker("slow") or item.get_closest_marker("agent")}
    items.sort(key=lambda item: item.path not in long_modules)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail the run when a test left a tmux socket file (or a whole server) behind; remove them
    either way."""
    if _is_xdist_worker(session.config) or not os.environ.get(TMUX_TMPDIR):
        return
    root = Path(os.environ[TMUX_TMPDIR])
    stale, live = leftovers(root / f"tmux-{os.geteuid()}")
    for name in live:
        subprocess.run(["tmux", "-S", str(root / f"tmux-{os.geteuid()}" / name), "kill-server"],
                       capture_output=True, check=False, timeout=30)
    shutil.rmtree(root, ignore_errors=True)
    if not stale and not live:
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_sep("=", "tmux sockets left behind", red=True)
        if stale:
            reporter.write_line(f"socket files with no server: {', '.join(stale)}")
        if live:
            reporter.write_line(f"servers still running (now killed): {', '.join(live)}")
    session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture(autouse=True)
def isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point the store at a temp folder and strip variables that would leak the user's tmux."""
    workers = tmp_path / "workers"
    monkeypatch.setenv("CONDUCTOR_WORKERS_DIR", str(workers))
    monkeypatch.setenv("CONDUCTOR_CONFIG", str(tmp_path / "config.toml"))
    monkeypatch.setenv("SHELL", "/bin/sh")
    for name in (
        "TMUX",
        "TMUX_PANE",
        "CONDUCTOR_TMUX_SOCKET",
        "OPENROUTER_API_KEY",
        "CONDUCTOR_PACKS_DIR",
        # An activated virtualenv exports its prompt: the tests' shells would not end theirs
        # with "$" or "#".
        "PS1",
    ):
        monkeypatch.delenv(name, raising=False)
    return workers


@pytest.fixture
def session_params() -> dict[str, Any]:
    return {"x": 200, "y": 50}


def conductor(
    *args: str,
    env: dict[str, str] | None = None,
    timeout: float = 30,
    input_text: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run the real CLI in a subprocess, as a user or a script would."""
    return subprocess.run(
        [sys.executable, "-m", "app", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
        cwd=REPO,
        input=input_text,
        check=False,
    )


def conductor_in_process(
    *args: str,
    env: dict[str, str] | None = None,
    input_text: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """The CLI run in this process, as :func:`conductor` runs it in a subprocess (same folder,
    environment and streams), for tests of what a command prints, writes and returns. A start
    costs ~0.15 s of CPU; tests about the process itself (exit codes on signals, ttys, start-up,
    daemons) keep :func:`conductor`. The environment and folder are restored afterwards."""
    from click.testing import CliRunner

    from app.entry import main

    saved_env, saved_cwd = dict(os.environ), Path.cwd()
    try:
        os.chdir(REPO)
        with CliRunner().isolation(input=input_text, env=env) as (out, err, _):
            code = main(list(args))
            sys.stdout.flush()  # print() (the status line's path) buffers; click.echo flushes
            sys.stderr.flush()
        return subprocess.CompletedProcess(["conductor", *args], code,
                                           out.getvalue().decode("utf-8", "replace"),
                                           err.getvalue().decode("utf-8", "replace"))
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)


@pytest.fixture
def watcher_process(server: Any) -> Iterator[Any]:
    """Start `conductor pty watch` against the test server; stop it with SIGTERM afterwards."""
    started: list[subprocess.Popen[str]] = []

    def start(*extra: str) -> subprocess.Popen[str]:
        proc = subprocess.Popen(
            [sys.executable, "-m", "app", "-L", server.socket_name, "pty", "watch", *extra],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=REPO,
        )
        started.append(proc)
        return proc

    yield start
    for proc in started:
        stop_process(proc, seconds=10)


@pytest.fixture
def watcher(server: Any, isolated_env: Path) -> Iterator[Watcher]:
    """An in-process Watcher on the test's tmux server and store; tests call ``tick()``
    themselves, faster than any interval, so READY needs no minimum seconds."""
    store = StoreWriter(isolated_env)
    yield Watcher(Tmux(socket_name=server.socket_name), store, load_packs(),
                  WatchSettings(interval_s=1, ready_min_s=0))
    store.close()


@pytest.fixture(scope="session")
def claude_install() -> Install:
    """The real Claude Code from npm (cached); the test is skipped where it cannot be had."""
    try:
        return install_claude()
    except AgentUnavailable as exc:
        pytest.skip(str(exc))


@pytest.fixture
def claude(claude_install: Install, tmp_path: Path, isolated_env: Path) -> Iterator[ClaudeInTmux]:
    """Claude, idle, in its own tmux server; hooks (if a test installs them) reach our store."""
    lab = ClaudeInTmux(tmp_path / "agent", claude_install.binary,
                       env={"CONDUCTOR_WORKERS_DIR": str(isolated_env)})
    yield lab
    lab.close()


# --- notification receivers: a private desktop bus, a recording notify_command ------------


@pytest.fixture
def notification_bus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[NotificationBus]:
    """A private session bus with a recording notification server; the process env points at it."""
    if sys.platform == "darwin":
        pytest.skip("desktop notifications on macOS go through osascript, not D-Bus")
    if shutil.which("notify-send") is None:
        pytest.skip("notify-send not found (Debian package: libnotify-bin)")
    bus = NotificationBus(tmp_path)
    try:
        bus.start()
    except BusUnavailable as e:
        pytest.skip(f"no private D-Bus session bus here: {e}")
    monkeypatch.setenv("DBUS_SESSION_BUS_ADDRESS", bus.address)
    yield bus
    bus.stop()



def write_script(path: Path, body: str) -> Path:
    path.write_text(f"#!{sys.executable}\n{body}", encoding="utf-8")
    path.chmod(0o755)
    return path


RECORD_ENV = """
import json, os, sys
with open(sys.argv[1], "a", encoding="utf-8") as out:
    env = {k: v for k, v in os.environ.items() if k.startswith("CONDUCTOR_")}
    out.write(json.dumps({"argv": sys.argv[1:], "env": env}) + "\\n")
"""


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.fixture
def notified(server: Any, isolated_env: Path, tmp_path: Path
             ) -> Iterator[tuple[Watcher, Notifier, Path]]:
    """A watcher whose transitions go through a real Notifier to a recording notify_command."""
    out = tmp_path / "notes.jsonl"
    script = write_script(tmp_path / "hook", RECORD_ENV)
    notifier = Notifier(NotifySettings(kinds=frozenset({COMMAND}), min_interval=0,
                                       notify_command=(str(script), str(out))), None)
    store = StoreWriter(isolated_env)
    yield Watcher(Tmux(socket_name=server.socket_name), store, load_packs(),
                  WatchSettings(interval_s=1, ready_min_s=0),
                  on_transition=_notify_with(notifier)), notifier, out
    store.close()
    notifier.close()
