"""A pane started by another pane's agent (`conductor pty create` run from inside it) names that
pane its `lead`; the lead's row counts its teammates, and the lead is not READY while one works
(issue 31, design/states.md "Leads and teammates")."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from app.act.create import lead_of_caller
from app.observe.background_work import TEAMMATES_WORKING
from app.observe.pane import worker_id
from app.run.watcher import Watcher
from tests.conftest import conductor
from tests.observe.test_background_hooks_and_notes import idle_claude_window
from tests.run.test_watcher_tick import PRINTER, screen_of, states_by_name
from tests.support.waiting import retry_until, wait_for_shell_prompt


def test_only_a_pane_of_the_same_server_is_taken_for_the_lead() -> None:
    inside = {"TMUX": "/tmp/tmux-1000/x,4242,0", "TMUX_PANE": "%7"}
    assert lead_of_caller("x", 4242, inside) == worker_id("x", 4242, "%7")
    assert lead_of_caller("x", 999, inside) is None  # another server's %7 is a stranger
    assert lead_of_caller("x", 4242, {"TMUX_PANE": "%7"}) is None
    assert lead_of_caller("x", 4242, {**inside, "TMUX_PANE": "%7; rm -rf /"}) is None
    assert lead_of_caller("x", 4242, {}) is None


def test_a_lead_waits_for_its_working_teammate(
        server: Any, session: Any, watcher: Watcher, isolated_env: Path, tmp_path: Path) -> None:
    lead_pane = idle_claude_window(session, "lead")
    socket_path = server.cmd("display-message", "-p", "#{socket_path}").stdout[0]
    pid = server.cmd("display-message", "-p", "#{pid}").stdout[0]
    created = conductor("-L", server.socket_name, "pty", "create", str(tmp_path), "--name",
                        "mate", "--cmd", PRINTER,
                        env={"TMUX": f"{socket_path},{pid},0", "TMUX_PANE": lead_pane.pane_id})
    assert created.returncode == 0, created.stderr
    retry_until(lambda: "line 3" in screen_of(session, "mate"), 30)

    def ticks() -> dict[str, dict[str, Any]]:
        for _ in range(3):
            watcher.tick(time.time())
            time.sleep(0.3)
        return states_by_name(isolated_env)

    states = ticks()
    lead_id = states["lead"]["id"]
    assert states["mate"]["lead"] == lead_id
    assert states["mate"]["state"] == "BUSY"
    assert states["lead"]["state"] == "BUSY"
    assert TEAMMATES_WORKING in states["lead"]["reasons"]

    done = conductor("pty", "status", "--json")
    rows = {w["name"]: w for w in json.loads(done.stdout)}
    assert (rows["lead"]["teammates"], rows["lead"]["teammates_working"]) == (1, 1)
    assert rows["lead"]["lead"] is None
    assert "1 teammate" in conductor("pty", "status").stdout
    assert "name this one their lead, 1 working" in conductor("pty", "explain", "lead").stdout

    # The teammate's work ends (its program is stopped): the lead is READY again.
    server.cmd("send-keys", "-t", states["mate"]["pane_id"], "C-c")
    retry_until(lambda: ticks()["lead"]["state"] == "READY", 20)
    assert ticks()["mate"]["state"] != "BUSY"


def test_a_person_s_shell_that_ran_create_is_not_held(
        server: Any, session: Any, watcher: Watcher, isolated_env: Path, tmp_path: Path) -> None:
    """The lead is recorded, but a shell waits for nobody: it stays READY."""
    shell = session.new_window(window_name="me", attach=False).active_pane
    wait_for_shell_prompt(lambda: screen_of(session, "me"))
    socket_path = server.cmd("display-message", "-p", "#{socket_path}").stdout[0]
    pid = server.cmd("display-message", "-p", "#{pid}").stdout[0]
    created = conductor("-L", server.socket_name, "pty", "create", str(tmp_path), "--name",
                        "mate", "--cmd", PRINTER,
                        env={"TMUX": f"{socket_path},{pid},0", "TMUX_PANE": shell.pane_id})
    assert created.returncode == 0, created.stderr
    retry_until(lambda: "line 3" in screen_of(session, "mate"), 30)
    for _ in range(3):
        watcher.tick(time.time())
        time.sleep(0.3)
    states = states_by_name(isolated_env)
    assert states["mate"]["lead"] == states["me"]["id"]
    assert (states["mate"]["state"], states["me"]["state"]) == ("BUSY", "READY")
