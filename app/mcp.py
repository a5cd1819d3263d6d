"""``conductor pty mcp``: an MCP server on stdio for agents, adapting tool calls to the same core
functions the CLI calls (``report``, ``goal``, ``status``, ``wait``, ``send``).

An agent starts it from its own pane, so "my pane" is ``$TMUX_PANE``. Tools fail the way the CLI
does: a refusal or a bad pane is a tool error with the same one line, never a crash of the
server. Only stdout carries the protocol; nothing here prints. Needs the optional ``mcp`` extra.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.errors import ConductorError

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

INSTRUCTIONS = """\
conductor pty watches the tmux panes where coding agents run. When you believe your task is \
done, call `report` with a short status (and `wait_cmd`, a command that checks the work, such \
as the test suite): it returns at once; conductor then runs the check, waits until you are \
idle, and either types your next instruction or tells the person. `set_goal` records what you \
are working towards."""


class Tools:
    """The tools, as plain methods (tested without a transport, served by :func:`server`)."""

    def __init__(self, socket_name: str | None, workers_dir: Path,
                 env: dict[str, str] | None = None) -> None:
        self.socket_name = socket_name
        self.workers_dir = workers_dir
        self.env = dict(os.environ) if env is None else env

    def _tmux(self) -> Any:
        from app.tmux import Tmux

        return Tmux(socket_name=self.socket_name)

    def _own_pane(self) -> Any:
        from app import handoff

        pane = self.env.get("TMUX_PANE", "").strip()
        if not pane:
            raise ConductorError("this MCP server does not run inside a tmux pane ($TMUX_PANE "
                                 "is not set), so it cannot tell whose report this is")
        return handoff.resolve(self._tmux(), self.workers_dir, pane)

    def report(self, status_report: str, wait_cmd: str | None = None) -> str:
        """An agent's report: its wait_cmd runs only when the person declared it (see
        ``jobs.agent_report``); the answer says which check, if any, the cycle runs."""
        from app.classify.redact import redact
        from app.configfile import load_config
        from app.cycle import jobs

        target = self._own_pane()
        done = jobs.agent_report(self.workers_dir, target.worker_id, status_report, wait_cmd,
                                 load_config(upgrade=False).cycle, origin="mcp")
        if done.declined is not None:
            instead = f" It runs the person's check for this pane instead: {redact(done.check)}." \
                if done.check else " No check runs; conductor waits a moment instead."
            check = (" Your wait_cmd was not run: from an agent, conductor runs only the check "
                     "the person declared for this pane (conductor pty goal ID TEXT --check "
                     f"CMD) or one listed in [cycle] allowed_checks of its config.{instead}")
        elif done.check:
            check = f" conductor will run the check {redact(done.check)}."
        else:
            check = ""
        return (f"Report recorded (cycle job {done.seq}).{check} Once you are idle, conductor "
                "either types your next instruction or asks the person. End your turn now.")

    def set_goal(self, goal: str) -> str:
        from app.cycle import jobs

        target = self._own_pane()
        done = jobs.set_goal(self.workers_dir, target.worker_id, goal)
        return f"goal of {target.name}: {done['goal'] or '(none)'}"

    def status(self) -> str:
        from app.status import snapshot

        fields = ("id", "name", "pane_id", "cli_type", "state", "cycle", "summary", "goal")
        workers = [{k: w.get(k) for k in fields} for w in snapshot(self.workers_dir).workers]
        return json.dumps(workers, ensure_ascii=False)

    def wait(self, pane: str, until: str = "READY", timeout: float = 600.0) -> str:
        from app import handoff
        from app.classify.packs import load_packs
        from app.configfile import load_config
        from app.notify import parse_states

        states = frozenset(parse_states(until.replace(",", " ").split()))
        if not states:
            raise ConductorError("until needs a state: READY, BUSY, NEEDS_CONFIRMATION or ERROR")
        tmux = self._tmux()
        target = handoff.resolve(tmux, self.workers_dir, pane)
        cfg = load_config(upgrade=False)
        watch = handoff.PaneWatch(tmux, target, load_packs(), cfg.watch, self.workers_dir)
        result = handoff.wait(watch, states, max(0.0, timeout), cfg.wait_poll_s)
        a = result.assessment
        verdict = "reached" if result.reached else "timed out"
        return (f"{verdict}: {target.label} is {a.state.value} after {result.waited_s:.1f}s"
                f"{': ' + a.summary if a.summary else ''}")

    def send(self, pane: str, text: str) -> str:
        from app import handoff
        from app.classify.packs import load_packs
        from app.configfile import load_config

        tmux = self._tmux()
        target = handoff.resolve(tmux, self.workers_dir, pane)
        handoff.send(tmux, target, text, load_packs(), load_config(upgrade=False).watch,
                     self.workers_dir, origin="mcp")
        return f"sent to {target.label}"


def server(tools: Tools) -> MCPServer:
    """The MCP server exposing :class:`Tools`; a ConductorError becomes a tool error."""
    import anyio
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError

    app: MCPServer = MCPServer("conductor-pty", instructions=INSTRUCTIONS)

    def call(method: Callable[..., str], *args: Any) -> str:
        # Our one-line errors reach the model as they are; anything else is a crash the SDK
        # reports without its text.
        try:
            return method(*args)
        except ConductorError as exc:
            raise ToolError(str(exc)) from None

    @app.tool()
    def report(status_report: str, wait_cmd: str | None = None) -> str:
        """Tell conductor you think your task is done; returns at once. wait_cmd: a shell
        command that checks the work (e.g. the test suite); it runs only if the person declared
        it for this pane or allowed it, and the answer says what runs instead."""
        return call(tools.report, status_report, wait_cmd)

    @app.tool()
    def set_goal(goal: str) -> str:
        """Record what this pane is working towards (the assessor judges reports against it)."""
        return call(tools.set_goal, goal)

    @app.tool()
    def status() -> str:
        """Every watched pane: id, name, CLI, state, cycle, summary, goal (JSON)."""
        return call(tools.status)

    @app.tool()
    async def wait(pane: str, until: str = "READY", timeout: float = 600.0) -> str:
        """Block until a pane (id, name or %N) is in a state (READY by default), or timeout s."""
        return await anyio.to_thread.run_sync(call, tools.wait, pane, until, timeout)

    @app.tool()
    def send(pane: str, text: str) -> str:
        """Type text into another pane, then Enter; refused when it asks for confirmation or
        holds unsent input."""
        return call(tools.send, pane, text)

    return app


def run(socket_name: str | None, workers_dir: Path) -> None:
    try:
        import mcp  # noqa: F401  # the optional extra
    except ImportError:
        raise ConductorError("the MCP server needs the optional extra: pip install "
                             "'conductor-pty[mcp]'") from None
    server(Tools(socket_name, workers_dir)).run("stdio")
