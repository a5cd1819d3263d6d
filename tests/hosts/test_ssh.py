"""The ssh adapter against a real sshd on loopback: quoting, the shared connection, faults, and
tmux (polling and control mode) on the far side."""

from __future__ import annotations

import stat
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from app.adapters.control import HOOK_OPTION, ControlMode
from app.adapters.ssh import SshVia, control_dir, remote_command
from app.adapters.tmux import Tmux
from app.base.errors import HostUnreachable, TmuxError
from tests.hosts.sshd import SshHost, short_folder
from tests.support.waiting import retry_until, stays_false

HOSTILE = [
    "a b", "'", '"', "$(touch {canary})", "`touch {canary}`", "; touch {canary}", "\\", "*",
    "line\nbreak", "-n", "--", "~", "$HOME", "%1", "#{{pane_id}}", "ünïcødé", "", "&&", "|", ">x",
]


def took_hooks(control: ControlMode, seen: list[tuple[str, str, float]]) -> bool:
    """Whether any hook was heard yet (those taken now added to ``seen``)."""
    seen.extend(control.take_hooks())
    return bool(seen)


def via_for(host: SshHost, tmp_path: Path) -> SshVia:
    return SshVia(host.name, host.name, tuple(host.ssh_options), short_folder(tmp_path))


def test_each_argument_arrives_as_itself(ssh_host: Callable[[str], SshHost],
                                         tmp_path: Path) -> None:
    host = ssh_host("alpha")
    canary = tmp_path / "canary"
    args = [a.format(canary=canary) for a in HOSTILE]
    done = via_for(host, tmp_path).run(["printf", "%s\\0", *args])
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\0")[:-1] == args
    assert not canary.exists()


def test_a_nul_byte_is_refused() -> None:
    with pytest.raises(TmuxError):
        remote_command(["echo", "a\0b"])


def test_the_socket_folder_is_private(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    folder = control_dir()
    assert stat.S_IMODE(Path(folder).stat().st_mode) == 0o700
    Path(folder).chmod(0o755)
    with pytest.raises(Exception, match="0700"):
        control_dir()


def test_calls_share_one_connection(ssh_host: Callable[[str], SshHost], tmp_path: Path) -> None:
    host = ssh_host("alpha")
    via = via_for(host, tmp_path)
    via.latency()
    sockets = list(Path(via.sockets).iterdir())
    assert len(sockets) == 1 and stat.S_ISSOCK(sockets[0].stat().st_mode)
    via.latency()
    assert list(Path(via.sockets).iterdir()) == sockets
    via.close()
    retry_until(lambda: not list(Path(via.sockets).iterdir()), 10)


def test_an_unreachable_host_is_reported_as_such(ssh_host: Callable[[str], SshHost],
                                                 tmp_path: Path) -> None:
    host = ssh_host("alpha")
    host.stop()
    tmux = Tmux(via=via_for(host, tmp_path))
    with pytest.raises(HostUnreachable, match="alpha"):
        tmux.list_panes()


def test_tmux_over_ssh_lists_captures_and_types(ssh_host: Callable[[str], SshHost],
                                                tmp_path: Path) -> None:
    host = ssh_host("alpha")
    canary = tmp_path / "canary"
    name = f"w $(touch {canary}) ';\""
    assert host.tmux("new-session", "-d", "-s", "s1", "-n", name, "-x", "120", "-y", "30",
                     "cat").returncode == 0
    tmux = Tmux(via=via_for(host, tmp_path))
    assert tmux.label == "alpha:default" and tmux.host == "alpha"
    panes = tmux.list_panes().panes
    assert [p.window_name for p in panes] == [name]
    text = f"echo '$(touch {canary})'; `x` \"q\" \\ end"
    tmux.send_text(panes[0].pane_id, text, enter_delay=0)

    def typed() -> bool:
        return text in tmux.capture([panes[0].pane_id])[panes[0].pane_id]

    retry_until(typed, 15)
    assert not canary.exists()


def test_control_mode_over_ssh_reports_output(ssh_host: Callable[[str], SshHost],
                                              tmp_path: Path) -> None:
    host = ssh_host("alpha")
    assert host.tmux("new-session", "-d", "-s", "s1", "cat").returncode == 0
    tmux = Tmux(via=via_for(host, tmp_path))
    control = ControlMode(tmux)
    try:
        listing = tmux.list_panes()
        control.follow({p.session_id for p in listing.panes})
        retry_until(lambda: control.watching() == {listing.panes[0].session_id}, 20)
        control.take()
        pane = listing.panes[0].pane_id
        tmux.send_text(pane, "hello", enter_delay=0)
        seen: dict[str, float] = {}

        def reported() -> bool:
            seen.update(control.take()[0])
            return pane in seen

        retry_until(reported, 15)
        assert seen[pane] <= time.monotonic()
    finally:
        control.close()


def test_control_clients_over_ssh_are_capped_and_the_rest_polled(
        ssh_host: Callable[[str], SshHost], tmp_path: Path) -> None:
    host = ssh_host("alpha")
    for name in ("s1", "s2", "s3"):
        assert host.tmux("new-session", "-d", "-s", name, "cat").returncode == 0
    tmux = Tmux(via=via_for(host, tmp_path))
    control = ControlMode(tmux)
    control.max_clients = 2
    try:
        sessions = {p.session_id for p in tmux.list_panes().panes}
        control.follow(sessions)
        retry_until(lambda: len(control.watching()) == 2, 20)
        control.follow(sessions)
        assert len(control.watching()) == 2 and control.watching() < sessions
    finally:
        control.close()


def test_hook_option_changes_are_reported_and_old_values_are_not(
        ssh_host: Callable[[str], SshHost], tmp_path: Path) -> None:
    host = ssh_host("alpha")
    assert host.tmux("new-session", "-d", "-s", "s1", "cat").returncode == 0
    host.tmux("set-option", "-p", "-t", "%0", HOOK_OPTION, "claude Stop 1")  # before we came
    tmux = Tmux(via=via_for(host, tmp_path))
    control = ControlMode(tmux)
    try:
        control.follow({p.session_id for p in tmux.list_panes().panes})
        retry_until(lambda: control.watching(), 20)
        assert stays_false(control.take_hooks, 3.0)
        host.tmux("set-option", "-p", "-t", "%0", HOOK_OPTION, "claude PermissionRequest 2")
        seen: list[tuple[str, str, float]] = []
        retry_until(lambda: took_hooks(control, seen), 10)
        pid = host.tmux("display-message", "-p", "#{pid}").stdout.strip()
        assert [(p, v) for p, v, _ in seen] == [("%0", f"{pid} claude PermissionRequest 2")]
    finally:
        control.close()


def test_a_stamped_hook_is_news_when_set_after_we_attached_however_soon(
        ssh_host: Callable[[str], SshHost], tmp_path: Path) -> None:
    host = ssh_host("alpha")
    assert host.tmux("new-session", "-d", "-s", "s1", "cat").returncode == 0
    long_ago = int(time.time()) - 3600
    host.tmux("set-option", "-p", "-t", "%0", HOOK_OPTION, f"claude Stop 1 {long_ago}")
    tmux = Tmux(via=via_for(host, tmp_path))
    control = ControlMode(tmux)
    try:
        control.follow({p.session_id for p in tmux.list_panes().panes})
        retry_until(lambda: control.watching(), 20)
        # At once, inside the first seconds that unstamped values would be taken as old.
        now = int(time.time())
        host.tmux("set-option", "-p", "-t", "%0", HOOK_OPTION, f"claude Stop 2 {now}")
        seen: list[tuple[str, str, float]] = []
        retry_until(lambda: took_hooks(control, seen), 10)
        pid = host.tmux("display-message", "-p", "#{pid}").stdout.strip()
        assert [(p, v) for p, v, _ in seen] == [("%0", f"{pid} claude Stop 2 {now}")]
    finally:
        control.close()
