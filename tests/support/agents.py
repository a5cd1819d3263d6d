"""Real agent CLIs for end-to-end tests: Claude Code and Codex in tmux, talking to loopback fakes.

:func:`install_claude` and :func:`install_codex` find the CLI in a cache folder or install it
there with npm (about 5 s each; 235 MB and 400 MB on disk). :class:`ClaudeInTmux` runs Claude
Code against :mod:`fake_anthropic`, :class:`CodexInTmux` runs Codex against :mod:`fake_openai`,
each in a 200x50 pane of a tmux server on its own socket, with a scratch HOME whose settings
skip every start-up dialog, and waits for the idle prompt. Nothing touches the user's tmux,
HOME or accounts, and closing the lab ends every process it started.

    install = install_claude()
    lab = ClaudeInTmux(tmp_path, install.binary, env={"CONDUCTOR_WORKERS_DIR": ...})
    # lab.settings_path (Codex: lab.config_path) exists before start: install hooks there first
    with lab:
        lab.server.queue(Say.words(20, delay=0.3))
        lab.type_text("hello")
        lab.send_keys("Enter")
        lab.server.wait_for_turn_end(1)
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from tests.support.fake_anthropic import FakeAnthropic
from tests.support.fake_openai import FakeOpenAI
from tests.support.scripted_model import ScriptedModel
from tests.support.tmux_sockets import ENV as TMUX_TMPDIR
from tests.support.tmux_sockets import socket_path
from tests.support.waiting import WaitTimeout, retry_until

CLAUDE_VERSION = "2.1.197"
CODEX_VERSION = "0.169.0"
ENV_AGENT_CACHE = "CONDUCTOR_AGENT_CACHE"
FAKE_API_KEY = "sk-ant-fake-conductor-test-0000000000"
FAKE_OPENAI_KEY = "sk-fake-conductor-test-0000000000"
# The footer under the input box of either CLI when it is idle and the box is empty.
IDLE_FOOTER = re.compile(r"\? for shortcuts")

TMUX_CONF = """\
set -g status off
set -g focus-events on
set -g escape-time 10
set -g history-limit 10000
set -g remain-on-exit on
set -g default-terminal tmux-256color
"""

# Everything but the provider's base_url, which waits for the fake's port (see CodexInTmux).
# `untrusted` is refused by 0.169; `on-request` in a read-only sandbox asks before any command
# the model wants to run outside it. The project is trusted in advance: no start-up dialog.
CODEX_CONFIG = """\
model = "gpt-5-codex"
model_provider = "fake"
approval_policy = "on-request"
sandbox_mode = "read-only"
check_for_update_on_startup = false

[analytics]
enabled = false

[projects.{project}]
trust_level = "trusted"
"""
CODEX_PROVIDER = {
    "name": "Fake OpenAI (conductor tests)",
    "env_key": "OPENAI_API_KEY",
    "wire_api": "responses",
    "request_max_retries": 1,
    "stream_max_retries": 1,
    "supports_websockets": False,
}


class AgentUnavailable(Exception):
    """The agent CLI cannot be had here (no npm, the install failed): a reason to skip."""


@dataclass(frozen=True)
class Install:
    binary: Path
    seconds: float | None  # how long npm took; None when it was already in the cache
    size_bytes: int  # the install folder on disk


def agent_cache(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    if env.get(ENV_AGENT_CACHE):
        return Path(env[ENV_AGENT_CACHE])
    return Path.home() / ".cache" / "conductor-pty" / "agents"


def install_claude(cache: Path | None = None, version: str = CLAUDE_VERSION) -> Install:
    """Claude Code ``version`` from ``cache``, installed there with npm if missing."""
    return _npm_install("Claude Code", "@anthropic-ai/claude-code", version, "claude-code",
                        "claude", cache)


def install_codex(cache: Path | None = None, version: str = CODEX_VERSION) -> Install:
    """The Codex CLI ``version`` from ``cache``, installed there with npm if missing."""
    return _npm_install("Codex", "@openai/codex", version, "codex", "codex", cache)


def _npm_install(label: str, package: str, version: str, folder_name: str, command: str,
                 cache: Path | None) -> Install:
    """npm writes into a folder of its own first, renamed into place when done, so an
    interrupted or concurrent install never leaves a half-filled folder that looks finished."""
    folder = (cache or agent_cache()) / f"{folder_name}-{version}"
    binary = folder / "node_modules" / ".bin" / command
    seconds: float | None = None
    if not binary.exists():
        npm = shutil.which("npm")
        if npm is None:
            raise AgentUnavailable(f"npm is not installed, so {label} cannot be installed")
        folder.parent.mkdir(parents=True, exist_ok=True)
        partial = folder.with_name(f"{folder.name}.partial-{os.getpid()}")
        started = time.monotonic()
        done = subprocess.run(
            [npm, "install", "--no-audit", "--no-fund", "--prefix", str(partial),
             f"{package}@{version}"],
            capture_output=True, text=True, timeout=600, check=False,
        )
        seconds = time.monotonic() - started
        if done.returncode != 0 or not (partial / "node_modules" / ".bin" / command).exists():
            shutil.rmtree(partial, ignore_errors=True)
            tail = (done.stderr or done.stdout).strip().splitlines()[-5:]
            raise AgentUnavailable(f"npm install of {label} {version} failed: "
                                   + " / ".join(tail))
        try:
            partial.rename(folder)
        except OSError:  # another process finished first; use its copy
            shutil.rmtree(partial, ignore_errors=True)
    return Install(binary, seconds, _size(folder))


def _size(folder: Path) -> int:
    """Bytes on disk, like ``du``: npm hard-links the big native binaries, count each once."""
    seen: dict[tuple[int, int], int] = {}
    for path in folder.rglob("*"):
        st = path.lstat()
        seen[(st.st_dev, st.st_ino)] = st.st_size
    return sum(seen.values())


class AgentInTmux:
    """An agent CLI in a fresh tmux server, idle and ready for a prompt once entered.

    ``root`` holds everything: ``home`` (the scratch HOME), ``project`` (the agent's working
    directory, a git repo with a ``build/`` folder to delete) and the tmux config. ``env`` is
    added to the pane's environment (say ``CONDUCTOR_WORKERS_DIR``, so hooks find the store).
    The venv's ``bin`` is first on the pane's PATH, so a hook command ``conductor …`` resolves
    to this checkout. Subclasses give the fake model, the command and its settings.
    """

    idle = IDLE_FOOTER
    cli = ""  # the name `conductor pty hooks install --cli` takes

    def __init__(self, root: Path, binary: Path, server: ScriptedModel, *,
                 env: Mapping[str, str] | None = None, size: tuple[int, int] = (200, 50),
                 start_seconds: float = 60.0) -> None:
        self.root = root
        self.binary = binary
        self.server = server
        self.home = root / "home"
        self.project = root / "project"
        self.socket_name = f"conductor-agent-{uuid.uuid4().hex[:10]}"
        self.pane_id = ""
        self._socket_path = ""
        self._extra_env = dict(env or {})
        self._size = size
        self._start_seconds = start_seconds
        self._conf = root / "tmux.conf"
        self.home.mkdir(parents=True, exist_ok=True)
        self.project.mkdir(parents=True, exist_ok=True)

    # for subclasses

    @property
    def hooks_path(self) -> Path:
        """The settings file our hooks go in, to be filled before the start."""
        raise NotImplementedError

    def command(self) -> list[str]:
        return [str(self.binary)]

    def agent_env(self) -> dict[str, str]:
        """Variables the agent needs to reach the fake and stay quiet."""
        return {}

    def _prepare(self) -> None:
        """Called with the fake server started, before the agent starts."""
        self._conf.write_text(TMUX_CONF)
        (self.project / "build").mkdir(exist_ok=True)
        (self.project / "build" / "out.o").write_text("object\n")
        (self.project / "README.md").write_text("# Demo project\n")
        subprocess.run(["git", "init", "-q", str(self.project)], capture_output=True, check=False)

    # lifecycle

    def __enter__(self) -> AgentInTmux:
        self.server.start()
        try:
            self._prepare()
            self.pane_id = self.tmux(
                "new-session", "-d", "-s", "agent", "-x", str(self._size[0]),
                "-y", str(self._size[1]), "-c", str(self.project), "-P", "-F", "#{pane_id}",
                "--", *self.command(),
            ).strip()
            self._socket_path = self.tmux("display-message", "-p", "#{socket_path}").strip()
            self.wait_for_screen(self.idle, self._start_seconds)
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Kill the tmux server, then any process it started that outlived it (an agent that
        ignored the hang-up, a hook still running) and anything run from inside ``root`` (a
        Codex app-server daemon lives under CODEX_HOME), then stop the fake. Safe to repeat."""
        ours = _descendants(self._pane_pids())
        subprocess.run(["tmux", "-L", self.socket_name, "kill-server"],
                       capture_output=True, check=False, timeout=10)
        # kill-server leaves the socket file behind (and the path may not have been read yet).
        Path(self._socket_path or socket_path(self.socket_name)).unlink(missing_ok=True)
        _end_processes({**ours, **_running_from(self.root)})
        self.server.stop()

    def _pane_pids(self) -> set[int]:
        try:
            out = self.tmux("list-panes", "-a", "-F", "#{pane_pid}")
        except (RuntimeError, subprocess.TimeoutExpired):
            return set()  # not started, or already gone
        return {int(pid) for pid in out.split()}

    def pane_env(self) -> dict[str, str]:
        """The whole environment of the tmux server, hence of the agent and of its hooks."""
        venv_bin = str(Path(sys.executable).parent)
        return {
            "PATH": os.pathsep.join([venv_bin, os.environ.get("PATH", "/usr/bin:/bin")]),
            "HOME": str(self.home),
            "LANG": "C.UTF-8",
            "SHELL": "/bin/bash",  # the agents run their shell commands with it
            # The run's own socket folder (tests/support/tmux_sockets.py), where conductor looks
            # too.
            **{k: v for k, v in os.environ.items() if k == TMUX_TMPDIR},
            **self.agent_env(),
            **self._extra_env,
        }

    # tmux

    def tmux(self, *args: str) -> str:
        done = subprocess.run(
            ["tmux", "-L", self.socket_name, "-f", str(self._conf), *args],
            capture_output=True, text=True, env=self.pane_env(), timeout=10, check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"tmux {args[0]} failed: {done.stderr.strip()}")
        return done.stdout

    def capture(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", self.pane_id)

    def send_keys(self, *keys: str) -> None:
        """tmux key names, as ``tmux send-keys`` reads them (``Enter``, ``Escape``, ``C-c``)."""
        self.tmux("send-keys", "-t", self.pane_id, *keys)

    def type_text(self, text: str) -> None:
        """``text`` typed literally, key names and all (no Enter).

        Codex takes an Enter that follows typed keys within a few ms as part of a paste (a
        newline): pause before sending Enter, as ``conductor pty send`` does.
        """
        self.tmux("send-keys", "-t", self.pane_id, "-l", text)

    def wait_for_screen(self, pattern: re.Pattern[str] | str, seconds: float = 30.0) -> str:
        """Poll the pane until ``pattern`` is on it; the screen that matched."""
        regex = re.compile(pattern) if isinstance(pattern, str) else pattern
        seen = [""]

        def on_screen() -> bool:
            seen[0] = self.capture()
            return bool(regex.search(seen[0]))

        try:
            retry_until(on_screen, seconds, interval=0.05)
        except WaitTimeout:
            raise WaitTimeout(f"/{regex.pattern}/ not on screen within {seconds} s; the pane "
                              f"shows:\n{seen[0]}") from None
        return seen[0]


class ClaudeInTmux(AgentInTmux):
    """Claude Code against :class:`FakeAnthropic`; its hooks go in ``settings_path``."""

    cli = "claude"

    def __init__(self, root: Path, binary: Path, *, env: Mapping[str, str] | None = None,
                 size: tuple[int, int] = (200, 50), start_seconds: float = 60.0) -> None:
        super().__init__(root, binary, FakeAnthropic(), env=env, size=size,
                         start_seconds=start_seconds)
        self.settings_path = self.home / ".claude" / "settings.json"
        self.settings_path.parent.mkdir(parents=True, exist_ok=True)

    @property
    def hooks_path(self) -> Path:
        return self.settings_path

    def _prepare(self) -> None:
        super()._prepare()
        # Every start-up dialog answered in advance: onboarding (without it Claude checks that
        # api.anthropic.com is reachable and exits), the custom API key and folder trust.
        claude_json = {
            "hasCompletedOnboarding": True,
            "lastOnboardingVersion": CLAUDE_VERSION,
            "theme": "dark",
            "numStartups": 3,
            "autoUpdates": False,
            "customApiKeyResponses": {"approved": [FAKE_API_KEY[-20:]], "rejected": []},
            "projects": {str(self.project.resolve()): {"hasTrustDialogAccepted": True}},
        }
        (self.home / ".claude.json").write_text(json.dumps(claude_json, indent=2))

    def agent_env(self) -> dict[str, str]:
        return {
            "ANTHROPIC_BASE_URL": self.server.base_url,
            "ANTHROPIC_API_KEY": FAKE_API_KEY,
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_ERROR_REPORTING": "1",
            "DISABLE_AUTOUPDATER": "1",
            "CLAUDE_CODE_MAX_RETRIES": "1",
        }


class CodexInTmux(AgentInTmux):
    """The Codex CLI against :class:`FakeOpenAI`, as a custom Responses-API provider.

    ``config_path`` (``codex_home/config.toml``) is written at construction, so ``conductor pty
    hooks install --cli codex --path`` can add ``notify`` before the start; the provider's
    ``base_url`` is filled in on entering, when the fake's port is known, keeping the rest.
    Codex runs with ``--no-daemon``: by default it starts a background app-server that outlives
    the TUI (``close`` would still end it).
    """

    cli = "codex"

    def __init__(self, root: Path, binary: Path, *, env: Mapping[str, str] | None = None,
                 size: tuple[int, int] = (200, 50), start_seconds: float = 60.0) -> None:
        super().__init__(root, binary, FakeOpenAI(), env=env, size=size,
                         start_seconds=start_seconds)
        self.codex_home = self.home / ".codex"
        self.config_path = self.codex_home / "config.toml"
        self.codex_home.mkdir(parents=True, exist_ok=True)
        project = json.dumps(str(self.project.resolve()))  # a TOML basic string
        self.config_path.write_text(CODEX_CONFIG.format(project=project))

    @property
    def hooks_path(self) -> Path:
        return self.config_path

    def command(self) -> list[str]:
        return [str(self.binary), "--no-daemon"]

    def _prepare(self) -> None:
        import tomlkit  # only Codex's labs need it

        super()._prepare()
        config = tomlkit.parse(self.config_path.read_text())
        config["model_providers"] = {
            "fake": {**CODEX_PROVIDER, "base_url": f"{self.server.base_url}/v1"}}
        self.config_path.write_text(tomlkit.dumps(config))

    def agent_env(self) -> dict[str, str]:
        return {"CODEX_HOME": str(self.codex_home), "OPENAI_API_KEY": FAKE_OPENAI_KEY}


class OldCodexInTmux(CodexInTmux):
    """Codex 0.142.5 or 0.152.0: the releases that draw no end mark (see the codex pack).

    They refuse ``--no-daemon`` (they start no app-server either) and show no ``? for shortcuts``
    under the input box: idle is the model line there (the model is CODEX_CONFIG's). The same
    config.toml serves: ``check_for_update_on_startup = false`` keeps their `Update available!`
    menu away.
    """

    idle = re.compile(r"(?m)^ {2}gpt-5-codex \w+ · ")

    def command(self) -> list[str]:
        return [str(self.binary)]


# processes


def _process_table() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, command line) for every process we may signal."""
    table = {}
    uid = os.getuid()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, ValueError, IndexError):
            if entry.stat().st_uid != uid:
                continue
            stat = (entry / "stat").read_text()
            parent = int(stat[stat.rindex(")") + 2:].split()[1])  # after "(comm) state"
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            table[int(entry.name)] = (parent, cmdline)
    return table


def _descendants(pids: set[int]) -> dict[int, str]:
    """``pids`` and every process below them, with their command lines."""
    table = _process_table()
    found = pids & table.keys()
    grew = True
    while grew:
        below = {pid for pid, (parent, _) in table.items() if parent in found} - found
        found |= below
        grew = bool(below)
    return {pid: table[pid][1] for pid in found}


def _running_from(folder: Path) -> dict[int, str]:
    """Processes whose command line names something inside ``folder``, ourselves aside."""
    mine = {os.getpid(), os.getppid()}
    return {pid: cmdline for pid, (_, cmdline) in _process_table().items()
            if str(folder) in cmdline and pid not in mine}


def _end_processes(expected: dict[int, str], seconds: float = 3.0) -> None:
    """SIGTERM each process still running with the command line we saw (so a pid reused
    meanwhile is left alone), then SIGKILL whoever is still there after ``seconds``."""
    def same(table: dict[int, tuple[int, str]]) -> set[int]:
        return {pid for pid, cmdline in expected.items()
                if pid in table and table[pid][1] == cmdline and _exists(pid)}

    alive = {pid for pid in same(_process_table()) if _signal(pid, signal.SIGTERM)}
    if not alive:
        return
    with contextlib.suppress(WaitTimeout):
        retry_until(lambda: not any(_exists(pid) for pid in alive), seconds, interval=0.05)
    for pid in alive & same(_process_table()):
        _signal(pid, signal.SIGKILL)


def _signal(pid: int, sig: signal.Signals) -> bool:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def _exists(pid: int) -> bool:
    """True while ``pid`` runs (a zombie, exited but not yet reaped, counts as gone)."""
    try:
        return (Path("/proc") / str(pid) / "stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False
