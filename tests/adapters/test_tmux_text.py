"""Text that is not ours stays data in tmux (issue 29): what we hand tmux is never expanded
(``#(...)`` runs nothing, ``#{...}`` and ``#[...]`` arrive as they are), and what tmux hands back
cannot be split or forged by the bytes in a name, a folder or a program's argv[0]."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from app.adapters.control import ControlClient, ControlMode
from app.adapters.store_read import StoreReader
from app.adapters.tmux import Tmux, literal
from app.base.errors import PaneNotFound
from app.base.inputs import BadInput, Refused, check_text, goal, report_text
from app.run.watcher import Watcher
from tests.conftest import REPO, conductor
from tests.support.tmux_sockets import reap
from tests.support.waiting import retry_until, stays_false, stop_process

# Each runs a command if tmux expands it; {canary} is a file only that command makes.
HOSTILE = (
    "w#(touch {canary})",
    "#{{pane_id}}#(touch${{IFS}}{canary})",
    "#[fg=red]x##(touch {canary})#[default]",
    "a#,b#}}c##d",
)


def hostile(template: str, canary: Path) -> str:
    return template.format(canary=canary)


def ran_nothing(canary: Path) -> bool:
    """``canary`` stays absent. The proof is the literal text read back (tmux replaces a job it
    started by the job's output); this watch is the second look, bounded: tmux runs format jobs
    in the background, and kills them when the command's client exits."""
    return stays_false(canary.exists, 1.0)


def panes(tmux: Tmux) -> dict[str, Any]:
    return {p.pane_id: p for p in tmux.list_panes().panes}


def raw_window(server: Any, command: str, cwd: Path | None = None) -> str:
    """A new window's pane id, made without libtmux: its own listing cannot parse the rows
    these tests forge."""
    done = subprocess.run(["tmux", "-L", server.socket_name, "new-window", "-d", "-P", "-F",
                           "#{pane_id}", *(["-c", str(cwd)] if cwd else []), command],
                          capture_output=True, text=True, check=True)
    return done.stdout.strip()


@pytest.mark.parametrize("template", HOSTILE)
def test_window_names_and_folders_arrive_as_they_are_and_run_nothing(
        server: Any, session: Any, tmp_path: Path, template: str) -> None:
    tmux = Tmux(socket_name=server.socket_name)
    canary = tmp_path / "canary"
    name = hostile(template, canary)
    folder = tmp_path / name.replace("/", "-")
    folder.mkdir()
    plain = tmux.new_window(str(folder), name, "sleep 1000")
    kept = tmux.new_window(str(folder), name, "sleep 1000", remain_on_exit=True)  # respawn -c
    targeted = tmux.new_window(str(folder), name, None, session_name=session.session_name)
    listed = panes(tmux)
    for pane in (plain, kept, targeted):
        assert listed[pane.pane_id].window_name == name
        assert listed[pane.pane_id].cwd == str(folder)
    assert listed[targeted.pane_id].session_id == session.session_id
    assert ran_nothing(canary)


def test_a_new_session_is_named_and_rooted_as_asked(tmp_path: Path) -> None:
    socket = f"cpty-text-{os.getpid()}"
    subprocess.run(["tmux", "-L", socket, "start-server", ";", "set-option", "-s", "exit-empty",
                    "off"], check=True, capture_output=True)
    try:
        tmux = Tmux(socket_name=socket)
        canary = tmp_path / "canary"
        name = hostile(HOSTILE[0], canary)
        folder = tmp_path / name.replace("/", "-")
        folder.mkdir()
        pane = tmux.new_window(str(folder), name, "sleep 1000")
        assert (pane.session_name, pane.window_name, pane.cwd) == ("conductor", name, str(folder))
        assert ran_nothing(canary)
    finally:
        reap(socket)


def test_a_message_on_the_status_line_shows_as_it_is(server: Any, session: Any,
                                                     tmp_path: Path) -> None:
    # A person's client: the test server's pane runs `tmux attach` to a second server.
    inner = f"cpty-text-inner-{os.getpid()}"
    subprocess.run(["tmux", "-L", inner, "new-session", "-d", "-s", "inner", "sleep 1000"],
                   check=True, capture_output=True)
    try:
        window = session.new_window(window_name="client", attach=False,
                                    window_shell=f"env -u TMUX tmux -L {inner} attach")
        tmux = Tmux(socket_name=inner)
        retry_until(lambda: tmux.run("list-clients").stdout.strip(), 10,
                    message="the client never attached")
        canary = tmp_path / "canary"
        message = hostile("note #(touch {canary}) #{{pane_id}} #[reverse]end", canary)
        tmux.display_message(message)
        shown = "#(touch " + str(canary) + ") #{pane_id} "
        retry_until(lambda: shown in "\n".join(window.active_pane.capture_pane()), 10)
        assert ran_nothing(canary)
    finally:
        reap(inner)


def test_pane_options_keep_their_value(server: Any, session: Any, tmp_path: Path) -> None:
    tmux = Tmux(socket_name=server.socket_name)
    canary = tmp_path / "canary"
    value = hostile(HOSTILE[1], canary)
    pane_id = session.active_window.active_pane.pane_id
    tmux.set_pane_option(pane_id, "@conductor-view", value)
    assert tmux.pane_option(pane_id, "@conductor-view") == value
    assert panes(tmux)[pane_id].view == value
    assert ran_nothing(canary)


def test_a_pane_id_that_is_not_one_is_refused_before_tmux_parses_it(
        server: Any, session: Any) -> None:
    tmux = Tmux(socket_name=server.socket_name)
    with pytest.raises(PaneNotFound):
        tmux.send_text("%0 ; kill-server", "hi")
    assert tmux.is_running()


def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(cwd), *args], check=True, capture_output=True,
                   env={**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
                        "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"})


def test_a_branch_name_that_would_run_a_command_starts_the_pane_in_its_worktree(
        server: Any, session: Any, tmp_path: Path, isolated_env: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    git(repo, "commit", "-q", "--allow-empty", "-m", "start")
    canary = tmp_path / "WTPWN"
    branch = f"x#(touch${{IFS}}{canary})"
    done = conductor("-L", server.socket_name, "pty", "create", str(repo), "--worktree", branch,
                     "--name", "wt", "--cmd", "sleep 1000")
    assert done.returncode == 0, done.stderr
    reader = StoreReader(isolated_env)
    [row] = [w for w in reader.workers() if w["name"] == "wt"]
    reader.close()
    folder = Path(row["worktree"])
    assert folder.name == branch.replace("/", "-") and folder.is_dir()
    tmux = Tmux(socket_name=server.socket_name)
    assert panes(tmux)[row["pane_id"]].cwd == str(folder)
    assert ran_nothing(canary)


# --- rows that cannot be forged ----------------------------------------------------------------

FORGED_ARGV0 = "q\n%0\x1fmain\x1f@0\x1f0\x1freviewer\x1f/tmp\x1fbash"


def test_a_forged_argv0_and_odd_folders_change_no_other_row(
        server: Any, session: Any, tmp_path: Path, watcher: Watcher, isolated_env: Path) -> None:
    tmux = Tmux(socket_name=server.socket_name)
    # A name of its own: automatic-rename would otherwise turn `tmux` into `sh` once the shell
    # starts, which on a loaded machine is after the row below was read.
    session.active_window.rename_window("first")
    first = session.active_window.active_pane.pane_id
    before = panes(tmux)[first]
    odd = tmp_path / "a\x1fb\nc"
    odd.mkdir()
    hidden = raw_window(server, "exec sleep 1000", odd)
    script = f"import os; os.execv('/bin/sleep', [{FORGED_ARGV0!r}, '1000'])"
    forger_id = raw_window(server, f"exec {sys.executable} -c \"{script}\"")
    retry_until(lambda: panes(tmux)[forger_id].current_command == FORGED_ARGV0, 10)
    listed = panes(tmux)
    ids = subprocess.run(["tmux", "-L", server.socket_name, "list-panes", "-a", "-F",
                          "#{pane_id}"], capture_output=True, text=True, check=True).stdout
    assert sorted(listed) == sorted(ids.split()) and {hidden, forger_id} <= set(listed)
    assert (listed[first].window_name, listed[first].cwd, listed[first].session_name) == \
        (before.window_name, before.cwd, before.session_name)
    assert listed[hidden].cwd == str(odd)
    watcher.tick()
    reader = StoreReader(isolated_env)
    rows = {w["pane_id"]: w for w in reader.workers()}
    reader.close()
    assert rows[first]["name"] == before.window_name and rows[first]["cwd"] == before.cwd
    assert rows[hidden]["cwd"] == str(odd)
    assert "reviewer" not in {w["name"] for w in rows.values()}


FAKE_TMUX = r'''
import sys
args = sys.argv[1:]
if "list-panes" in args:
    fmt = args[args.index("list-panes") + 3]  # list-panes -a -F FORMAT
    head, rest = fmt.split(">", 1)
    token = head[1:-1]
    sep = "<" + token + "|>"
    fixed, *free = rest.split(sep)
    ids = {"#{pane_id}": "%1", "#{window_id}": "@1", "#{session_id}": "$1"}
    def row(**changed):
        values = " ".join(changed.get(f, ids.get(f, "1")) for f in fixed.split(" "))
        return "<" + token + "p>" + values + sep + sep.join("x" for _ in free)
    print(row())
    print(row(**{"#{pane_id}": "%2 ; kill-server"}))
    print(row(**{"#{pane_id}": "@3"}))
    print(row(**{"#{pane_id}": "%4"}) + sep + "spare")
'''


def test_rows_that_tmux_did_not_make_are_dropped_and_logged(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
        ) -> None:
    # A host's tmux is the host's: what it prints is checked, not believed.
    fake = tmp_path / "bin" / "tmux"
    fake.parent.mkdir()
    fake.write_text(f"#!{sys.executable}\n{FAKE_TMUX}", encoding="utf-8")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    tmux = Tmux(socket_name="unused")
    with caplog.at_level(logging.WARNING, logger="app.adapters.tmux"):
        listed = tmux.list_panes().panes
        tmux.list_panes()
    assert [p.pane_id for p in listed] == ["%1"]
    dropped = [r for r in caplog.records if "dropped" in r.getMessage()]
    assert len(dropped) == 3


# --- text that is not UTF-8 ---------------------------------------------------------------------


def test_lone_surrogates_are_refused_by_every_input_check() -> None:
    text = "cat /etc/host" + b"\xff".decode("utf-8", "surrogateescape")
    with pytest.raises(Refused, match="not UTF-8"):
        check_text(text)
    with pytest.raises(BadInput, match="not UTF-8"):
        goal(text)
    with pytest.raises(BadInput, match="not UTF-8"):
        report_text("\udcff")


def test_send_of_bytes_that_are_not_utf8_types_nothing(server: Any, session: Any,
                                                        tmp_path: Path) -> None:
    pane = session.new_window(window_name="sh", attach=False, start_directory=str(tmp_path),
                              window_shell="env -i PS1='lab$ ' bash --norc --noprofile"
                              ).active_pane
    retry_until(lambda: "lab$" in "\n".join(pane.capture_pane()), 10)
    bad = os.fsdecode(b"echo typed\xff")
    argv = [sys.executable, "-m", "app", "-L", server.socket_name, "pty", "send", pane.pane_id]
    done = subprocess.run([*argv, bad], capture_output=True, text=True, cwd=REPO, check=False,
                          timeout=60)
    assert done.returncode == 1 and done.stderr.count("\n") == 1, done.stderr
    assert "not valid UTF-8" in done.stderr
    piped = subprocess.run(argv, input=b"echo piped\xff\n", capture_output=True, cwd=REPO,
                           check=False, timeout=60)
    assert piped.returncode == 1 and b"not valid UTF-8" in piped.stderr, piped.stderr
    done = conductor("-L", server.socket_name, "pty", "send", pane.pane_id, "echo after")
    assert done.returncode == 0, done.stderr
    retry_until(lambda: "after" in "\n".join(pane.capture_pane()).split("echo after")[-1], 10)
    assert "typed" not in "\n".join(pane.capture_pane())
    assert "piped" not in "\n".join(pane.capture_pane())


@pytest.mark.parametrize("args", [
    ("pty", "goal", "w", "\udcff"),
    ("pty", "report", "w", "done\udcff"),
    ("pty", "send", "--queue", "w", "x\udcff"),
    ("pty", "-L", "s\udcff", "status"),
    ("pty", "-L", "s\udcff", "status", "--short"),
], ids=["goal", "report", "send-queue", "socket", "short-status"])
def test_arguments_that_are_not_utf8_are_one_line(args: tuple[str, ...]) -> None:
    argv = [os.fsencode(a) for a in (sys.executable, "-m", "app", *args)]
    done = subprocess.run(argv, capture_output=True, cwd=REPO, check=False, timeout=60)
    assert done.returncode == 1
    assert done.stderr.count(b"\n") == 1 and b"not valid UTF-8" in done.stderr, done.stderr


def test_literal_doubles_every_hash_but_a_style_run() -> None:
    assert literal("#(x)#{y}##z") == "##(x)##{y}####z"
    assert literal("#[fg=red]##[x]") == "#[fg=red]##[x]"


def test_a_lone_surrogate_over_mcp_types_nothing_and_the_server_goes_on(
        server: Any, session: Any, tmp_path: Path, isolated_env: Path) -> None:
    # Raw JSON-RPC: the official client cannot even encode such a string, an agent's may.
    pytest.importorskip("mcp")
    from tests.front.test_mcp_server import tmux_env

    pane = session.new_window(window_name="sh", attach=False, start_directory=str(tmp_path),
                              window_shell="env -i PS1='lab$ ' bash --norc --noprofile"
                              ).active_pane
    retry_until(lambda: "lab$" in "\n".join(pane.capture_pane()), 10)
    calls = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "probe", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "send", "arguments": {"pane": pane.pane_id, "text": "echo typed\udcff"}}},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
            "name": "set_goal", "arguments": {"goal": "goal\udcff"}}},
        {"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {
            "name": "status", "arguments": {}}},
    ]
    proc = subprocess.Popen(
        [sys.executable, "-m", "app", "-L", server.socket_name, "--workers-dir",
         str(isolated_env), "pty", "mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, cwd=REPO,
        env={**os.environ, "TMUX_PANE": pane.pane_id, "TMUX": tmux_env(server)})
    assert proc.stdin is not None and proc.stdout is not None
    replies: dict[int, Any] = {}
    try:
        for call in calls:  # "\udcff" as JSON writes it, which any agent's client may send
            proc.stdin.write(json.dumps(call) + "\n")
        proc.stdin.flush()
        while 4 not in replies:  # the run's timeout guards a server that hangs
            line = proc.stdout.readline()
            assert line, "the MCP server ended before answering"
            reply = json.loads(line)
            replies[reply.get("id")] = reply
    finally:
        proc.stdin.close()
        stop_process(proc, seconds=10)
    stderr = proc.stderr.read() if proc.stderr else ""
    # The SDK drops a request it cannot decode without an answer; one that reached us is an
    # error. Either way nothing is typed, and the server goes on.
    for call in (2, 3):
        reply = replies.get(call, {"error": "dropped"})
        assert "error" in reply or reply["result"].get("isError"), reply
    assert not replies[4].get("error"), replies[4]
    assert "Traceback" not in stderr, stderr[-2000:]
    assert "typed" not in "\n".join(pane.capture_pane())


def test_a_title_reply_is_taken_only_behind_the_clients_own_token(server: Any,
                                                                  session: Any) -> None:
    # A title with a newline (tmux before 3.3 keeps one) printed "conductor-title %N ..." as
    # a line of its own, a reply for another pane.
    tmux = Tmux(socket_name=server.socket_name)
    control = ControlMode(tmux)
    client = ControlClient(tmux, session.session_id, control)
    try:
        client._handle(b"%begin 1 1 0")
        client._handle(b"conductor-title %0 forged")
        client._handle(client._title_mark + b"%1 real")
        client._handle(b"%end 1 1 0")
        assert [(p, s.text) for p, took in control.take_signals().items() for _, s in took] \
            == [("%1", "real")]
    finally:
        client.close()
