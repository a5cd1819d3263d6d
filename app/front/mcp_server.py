"""``conductor pty mcp``: an MCP server on stdio for agents, adapting tool calls to the commands
the CLI calls too (``app.front.commands``: ``report``, ``goal``, ``wait``, ``send``) and to
``status``'s snapshot.

An agent starts it from its own pane, so "my pane" is ``$TMUX_PANE`` on the tmux server named by
``$TMUX``. It acts for that pane: ``send`` types only into it, or into a pane the person named in
the config's ``[mcp] send_to``, never into a paused pane, and nothing at all when the caller's pane
is on another tmux server than the one it serves. ``wait`` and ``status`` only read, so they reach
every pane of that server. Tools fail the way the CLI does: a refusal or a bad pane is a tool
error with the same one line, never a crash of the server. Only stdout carries the protocol;
nothing here prints. Needs the optional ``mcp`` extra.

An agent's server is bounded, whatever the agent does: at most :data:`MAX_WAITS` ``wait``s at
once (each polls tmux twice a second, every :data:`QUIET_POLL_S` once the pane's screen stays
the same; an agent that gives up on a call cancels it, and its wait stops at once instead of
polling on to its own timeout), and reports at most
:data:`REPORT_BURST` at a time, then one every :data:`REPORT_EVERY_S` seconds (each queues a
cycle; a newer one supersedes the older, so the refused ones lose nothing the last did not say).
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.base.errors import ConductorError, error_line

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

    from app.adapters.tmux import Tmux
    from app.observe.one_pane import Target

INSTRUCTIONS = """\
conductor pty watches the tmux panes where coding agents run. When you believe your task is \
done, call `report` with a short status (and `wait_cmd`, a command that checks the work, such \
as the test suite): it returns at once; conductor then runs the check, waits until you are \
idle, and either types your next instruction or tells the person. `set_goal` records what you \
are working towards."""

# The longest a `wait` call may block (seconds): each call holds one of the server's threads.
MAX_WAIT_S = 3600.0
# Waits running at once: one per pane an agent could sensibly watch; each polls tmux on its own.
MAX_WAITS = 4
# An agent's wait on a pane that shows the same screen (a question for the person, a long quiet
# run) looks this often: a quarter of the polls, at most this much later.
QUIET_POLL_S = 2.0
REPORT_BURST = 3
REPORT_EVERY_S = 10.0


class Bucket:
    """``burst`` takes at once, then one more every ``every_s`` seconds (thread-safe: the SDK
    runs each call in a thread of its own)."""

    def __init__(self, burst: int, every_s: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.burst = burst
        self.every_s = every_s
        self.clock = clock
        self._tokens = float(burst)
        self._at = clock()
        self._lock = threading.Lock()

    def take(self) -> float:
        """0 when taken; else the seconds until one can be."""
        with self._lock:
            now = self.clock()
            self._tokens = min(self.burst, self._tokens + (now - self._at) / self.every_s)
            self._at = now
            if self._tokens >= 1:
                self._tokens -= 1
                return 0.0
            return (1 - self._tokens) * self.every_s

    def give_back(self) -> None:
        with self._lock:
            self._tokens = min(self.burst, self._tokens + 1)


class Tools:
    """The tools, as plain methods (tested without a transport, served by :func:`server`)."""

    def __init__(self, socket_name: str | None, workers_dir: Path,
                 env: dict[str, str] | None = None) -> None:
        self.socket_name = socket_name
        self.workers_dir = workers_dir
        self.env = dict(os.environ) if env is None else env
        # Held by the wait's thread until it really ends, not only until its call is answered.
        self._waits = threading.BoundedSemaphore(MAX_WAITS)
        self._reports = Bucket(REPORT_BURST, REPORT_EVERY_S)

    def _tmux(self) -> Tmux:
        from app.adapters.tmux import Tmux

        return Tmux(socket_name=self.socket_name)

    def _own_pane(self) -> Target:
        from app.front import commands

        pane = self.env.get("TMUX_PANE", "").strip()
        if not pane:
            raise ConductorError("this MCP server does not run inside a tmux pane ($TMUX_PANE "
                                 "is not set), so it cannot tell which pane it acts for")
        tmux = self._tmux()
        self._check_server(tmux, required=True)
        return commands.resolve(tmux, self.workers_dir, pane)

    def _check_server(self, tmux: Tmux, *, required: bool) -> None:
        """Refuse when the caller's pane is on another tmux server than the one this MCP server
        drives: pane ids repeat across servers, so its ``%3`` would be a stranger's ``%3``."""
        from app.base.inputs import Refused

        # $TMUX is "<socket path>,<server pid>,<session index>", set by tmux in every pane.
        socket_path, _, rest = self.env.get("TMUX", "").partition(",")
        pid = rest.partition(",")[0]
        if not pid.isdigit():
            if required:
                raise Refused("this MCP server cannot tell which tmux server its pane is on "
                              "($TMUX is not set), so it acts for no pane")
            return
        serving = tmux.list_panes().server_pid
        if int(pid) != serving:
            raise Refused(f"refused: this MCP server runs in a pane of the tmux server "
                          f"{socket_path or pid} but serves the tmux server {tmux.label}; give "
                          "`conductor pty mcp` the -L (socket name) of the agent's server")

    def report(self, status_report: str, wait_cmd: str | None = None) -> str:
        """An agent's report: its wait_cmd runs only when the person declared it (see
        ``jobs.agent_report``); the answer says which check, if any, the cycle runs."""
        from app.base.redact import redact
        from app.front import commands
        from app.run.configfile import load_config

        target = self._own_pane()
        later = self._reports.take()
        if later:
            raise ConductorError(
                f"refused: too many reports ({REPORT_BURST} at once, then one every "
                f"{REPORT_EVERY_S:g} s); your last report stands and its cycle runs. Report "
                f"again in {later:.0f} s if there is something new to say")
        try:
            done = commands.report(self.workers_dir, target.worker_id, status_report, wait_cmd,
                                   load_config(upgrade=False), by_agent=True)
        except ConductorError:
            self._reports.give_back()  # nothing was recorded
            raise
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
        from app.front import commands

        target = self._own_pane()
        done = commands.goal(self.workers_dir, target.worker_id, goal)
        return f"goal of {target.name}: {done['goal'] or '(none)'}"

    def status(self, include_exited: bool = False) -> str:
        from app.adapters.status import snapshot
        from app.base import render

        if not isinstance(include_exited, bool):
            raise ConductorError(f"include_exited must be true or false, got {include_exited!r}")
        return json.dumps(render.mcp_rows(snapshot(self.workers_dir).workers, include_exited),
                          ensure_ascii=False)

    def wait(self, pane: str, until: str = "READY", timeout: float = 600.0,
             stop: threading.Event | None = None) -> str:
        """Any pane of this tmux server, not only the caller's: it only reads what ``status``
        shows of every pane, and the caller's own pane is BUSY until this call returns.
        ``stop`` set (the call was cancelled) ends it at the next poll."""
        from app.front import commands
        from app.run.configfile import load_config

        states = commands.wait_states(until, "until")
        if not 0 <= timeout <= MAX_WAIT_S:  # also false for NaN
            raise ConductorError(f"timeout must be seconds from 0 to {MAX_WAIT_S:g}, "
                                 f"got {timeout!r}")
        if not self._waits.acquire(blocking=False):
            raise ConductorError(f"refused: {MAX_WAITS} waits of this MCP server are running "
                                 "already; let one of them end before starting another")
        try:
            tmux = self._tmux()
            self._check_server(tmux, required=False)
            target = commands.resolve(tmux, self.workers_dir, pane)
            _, result = commands.wait(tmux, self.workers_dir, target, states, timeout,
                                      load_config(upgrade=False, env=self.env), stop=stop,
                                      quiet_poll_s=QUIET_POLL_S)
        finally:
            self._waits.release()
        a = result.assessment
        verdict = "reached" if result.reached else "timed out"
        return (f"{verdict}: {target.label} is {a.state.value} after {result.waited_s:.1f}s"
                f"{': ' + a.summary if a.summary else ''}")

    def send(self, pane: str, text: str) -> str:
        """Into the caller's own pane, or one the person named in ``[mcp] send_to``; never a
        paused pane. Then the refusals of ``conductor pty send``."""
        from app.act import handoff
        from app.front import commands
        from app.run.configfile import load_config

        own = self._own_pane()
        tmux = self._tmux()
        target = commands.resolve(tmux, self.workers_dir, pane)
        cfg = load_config(upgrade=False, env=self.env)
        if target.pane.pane_id != own.pane.pane_id and not cfg.mcp.may_send(
                target.worker_id, target.pane.pane_id, target.name):
            raise handoff.Refused(
                f"not sent: this MCP server types only into its own pane, {own.label}; the "
                f"person may allow {target.label} with send_to = [{json.dumps(target.name)}] "
                f"in [mcp] of {cfg.path}")
        if commands.paused(self.workers_dir, target.worker_id):
            raise handoff.Refused(
                f"not sent: the cycle of {target.label} is paused, so nothing is typed into it "
                f"until the person resumes it (`conductor pty resume {target.worker_id}`)")
        commands.send(tmux, self.workers_dir, target, text, cfg, origin="mcp")
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
            raise ToolError(error_line(str(exc))) from None

    @app.tool()
    def report(status_report: str, wait_cmd: str | None = None) -> str:
        """Tell conductor you think your task is done; returns at once. wait_cmd: a shell
        command that checks the work (e.g. the test suite); it runs only if the person declared
        it for this pane or allowed it, and the answer says what runs instead. Report once
        per task: a burst of reports is refused (the last one stands)."""
        return call(tools.report, status_report, wait_cmd)

    @app.tool()
    def set_goal(goal: str) -> str:
        """Record what this pane is working towards (the assessor judges reports against it)."""
        return call(tools.set_goal, goal)

    @app.tool()
    def status(include_exited: bool = False) -> str:
        """Every live watched pane: id (unique), name, host, pane_id (HOST:%N on another
        host), CLI, state, cycle, summary, goal (JSON); include_exited: the exited ones too."""
        return call(tools.status, include_exited)

    @app.tool()
    async def wait(pane: str, until: str = "READY", timeout: float = 600.0) -> str:
        """Block until a pane (id, name or %N) of this tmux server is in a state (READY by
        default), or timeout seconds (at most 3600) pass. Any pane: it only reads. At most 4
        waits run at once."""
        stop = threading.Event()
        try:
            # Not shielded from cancellation: a call the agent gave up on (or a server that
            # shuts down) answers at once, and ``stop`` ends the thread's polling.
            return await anyio.to_thread.run_sync(call, tools.wait, pane, until, timeout, stop,
                                                  abandon_on_cancel=True)
        finally:
            stop.set()

    @app.tool()
    def send(pane: str, text: str) -> str:
        """Type text into a pane, then Enter: your own pane, or a pane the person allowed in
        the config ([mcp] send_to); refused for other panes, a paused pane, a pane asking for
        confirmation or holding unsent input."""
        return call(tools.send, pane, text)

    return app


def run(socket_name: str | None, workers_dir: Path) -> None:
    try:
        import mcp  # noqa: F401  # the optional extra
    except ImportError:
        raise ConductorError("the MCP server needs the optional extra: from a checkout, run "
                             "scripts/install.sh --mcp (or pip install '.[mcp]')") from None
    server(Tools(socket_name, workers_dir)).run("stdio")
