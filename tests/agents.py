"""Real agent CLIs for end-to-end tests: Claude Code in tmux, talking to :mod:`fake_anthropic`.

:func:`install_claude` finds Claude Code in a cache folder or installs it there with npm (about
5 s and 235 MB on disk); :class:`ClaudeInTmux` runs it in a 200x50 pane of a tmux server on its
own socket, with a scratch HOME whose ``~/.claude.json`` skips every start-up dialog, and waits
for the idle prompt. Nothing touches the user's tmux, HOME or Anthropic account.

    install = install_claude()
    lab = ClaudeInTmux(tmp_path, install.binary, env={"CONDUCTOR_WORKERS_DIR": ...})
    # lab.settings_path exists before start: install hooks there first
    with lab:
        lab.server.queue(Say.words(20, delay=0.3))
        lab.type_text("hello")
        lab.send_keys("Enter")
        lab.server.wait_for_turn_end(1)
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from tests.fake_anthropic import FakeAnthropic
from tests.waiting import WaitTimeout, retry_until

CLAUDE_VERSION = "2.1.197"
ENV_AGENT_CACHE = "CONDUCTOR_AGENT_CACHE"
FAKE_API_KEY = "sk-ant-fake-conductor-test-0000000000"
# The footer under Claude's input box when it is idle and the box is empty.
CLAUDE_IDLE = re.compile(r"\? for shortcuts")

TMUX_CONF = """\
set -g status off
set -g focus-events on
set -g escape-time 10
set -g history-limit 10000
set -g remain-on-exit on
set -g default-terminal tmux-256color
"""


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
    """Claude Code ``version`` from ``cache``, installed there with npm if missing.

    npm writes into a folder of its own first, renamed into place when done, so an interrupted
    or concurrent install never leaves a half-filled folder that looks finished.
    """
    folder = (cache or agent_cache()) / f"claude-code-{version}"
    binary = folder / "node_modules" / ".bin" / "claude"
    seconds: float | None = None
    if not binary.exists():
        npm = shutil.which("npm")
        if npm is None:
            raise AgentUnavailable("npm is not installed, so Claude Code cannot be installed")
        folder.parent.mkdir(parents=True, exist_ok=True)
        partial = folder.with_name(f"{folder.name}.partial-{os.getpid()}")
        started = time.monotonic()
        done = subprocess.run(
            [npm, "install", "--no-audit", "--no-fund", "--prefix", str(partial),
             f"@anthropic-ai/claude-code@{version}"],
            capture_output=True, text=True, timeout=600, check=False,
        )
        seconds = time.monotonic() - started
        if done.returncode != 0 or not (partial / "node_modules" / ".bin" / "claude").exists():
            shutil.rmtree(partial, ignore_errors=True)
            tail = (done.stderr or done.stdout).strip().splitlines()[-5:]
            raise AgentUnavailable(f"npm install of Claude Code {version} failed: "
                                   + " / ".join(tail))
        try:
            partial.rename(folder)
        except OSError:  # another process finished first; use its copy
            shutil.rmtree(partial, ignore_errors=True)
    return Install(binary, seconds, _size(folder))


def _size(folder: Path) -> int:
    """Bytes on disk, like ``du``: npm hard-links the 245 MB native binary, count it once."""
    seen: dict[tuple[int, int], int] = {}
    for path in folder.rglob("*"):
        st = path.lstat()
        seen[(st.st_dev, st.st_ino)] = st.st_size
    return sum(seen.values())


class ClaudeInTmux:
    """Claude Code in a fresh tmux server, idle and ready for a prompt once entered.

    ``root`` holds everything: ``home`` (the scratch HOME), ``project`` (Claude's working
    directory, a git repo with a ``build/`` folder to delete) and the tmux config. ``env`` is
    added to the pane's environment (say ``CONDUCTOR_WORKERS_DIR``, so hooks find the store).
    The venv's ``bin`` is first on the pane's PATH, so a hook command ``conductor …`` resolves
    to this checkout.
    """

    def __init__(self, root: Path, binary: Path, *, env: Mapping[str, str] | None = None,
                 size: tuple[int, int] = (200, 50), start_seconds: float = 60.0) -> None:
        self.root = root
        self.binary = binary
        self.home = root / "home"
        self.project = root / "project"
        self.settings_path = self.home / ".claude" / "settings.json"
        self.server = FakeAnthropic()
        self.socket_name = f"conductor-agent-{uuid.uuid4().hex[:10]}"
        self.pane_id = ""
        self._socket_path = ""
        self._extra_env = dict(env or {})
        self._size = size
        self._start_seconds = start_seconds
        self._conf = root / "tmux.conf"
        self.settings_path.parent.mkdir(parents=True, exist_ok=True)
        self.project.mkdir(parents=True, exist_ok=True)

    # lifecycle

    def __enter__(self) -> ClaudeInTmux:
        self.server.start()
        try:
            self._prepare()
            self.pane_id = self.tmux(
                "new-session", "-d", "-s", "agent", "-x", str(self._size[0]),
                "-y", str(self._size[1]), "-c", str(self.project), "-P", "-F", "#{pane_id}",
                "--", str(self.binary),
            ).strip()
            self._socket_path = self.tmux("display-message", "-p", "#{socket_path}").strip()
            self.wait_for_screen(CLAUDE_IDLE, self._start_seconds)
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
        subprocess.run(["tmux", "-L", self.socket_name, "kill-server"],
                       capture_output=True, check=False, timeout=10)
        if self._socket_path:  # kill-server leaves the socket file behind
            Path(self._socket_path).unlink(missing_ok=True)
        self.server.stop()

    def _prepare(self) -> None:
        self._conf.write_text(TMUX_CONF)
        (self.project / "build").mkdir(exist_ok=True)
        (self.project / "build" / "out.o").write_text("object\n")
        (self.project / "README.md").write_text("# Demo project\n")
        subprocess.run(["git", "init", "-q", str(self.project)], capture_output=True, check=False)
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

    def pane_env(self) -> dict[str, str]:
        """The whole environment of the tmux server, hence of Claude and of its hooks."""
        venv_bin = str(Path(sys.executable).parent)
        return {
            "PATH": os.pathsep.join([venv_bin, os.environ.get("PATH", "/usr/bin:/bin")]),
            "HOME": str(self.home),
            "LANG": "C.UTF-8",
            "SHELL": "/bin/bash",  # Claude's Bash tool runs commands with it
            "ANTHROPIC_BASE_URL": self.server.base_url,
            "ANTHROPIC_API_KEY": FAKE_API_KEY,
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_ERROR_REPORTING": "1",
            "DISABLE_AUTOUPDATER": "1",
            "CLAUDE_CODE_MAX_RETRIES": "1",
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
        """``text`` typed literally, key names and all (no Enter)."""
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
