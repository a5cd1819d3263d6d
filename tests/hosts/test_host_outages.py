"""Hosts going away and coming back under a real watcher, with real sshd on loopback: nothing of
ours stays on a host after a stop, a dropped connection or a reconnect; one host down leaves
the other host and this machine fresh; a host that answers nothing is not retried in a busy
loop."""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from app.adapters.ssh import HostConfig
from app.adapters.store import StoreWriter
from app.adapters.store_read import StoreMissing, StoreReader
from app.base.settings import WatchSettings
from app.run.hosts import CappedTmux, HostWatch
from app.run.runner import QuietRepeats
from tests.conftest import conductor
from tests.hosts.conftest import write_hosts
from tests.hosts.sshd import SshHost
from tests.hosts.test_watch_hosts import AGENT, agent_on, rows
from tests.support.waiting import STARTS_WITHIN_S, WaitTimeout, retry_until, stop_process

INTERVAL = 1.0


def sockets() -> str:
    return f"{os.environ['XDG_RUNTIME_DIR']}/conductor-pty-ssh-{os.getuid()}"


def control_clients(host: SshHost) -> list[str]:
    return [p for p in host.our_processes() if " -C " in f" {p} "]


def hosts_table(workers: Path) -> dict[str, dict[str, Any]]:
    try:
        reader = StoreReader(workers)
    except StoreMissing:
        return {}  # the watcher has not made it yet
    try:
        return reader.hosts()
    finally:
        reader.close()


def reached_since(workers: Path, name: str, since: float) -> bool:
    row = hosts_table(workers).get(name, {})
    return bool(row.get("reachable")) and (row.get("reached_ts") or 0) > since


def wait_watched(workers: Path, host: SshHost, since: float) -> None:
    """Until the watcher reached ``host`` after ``since`` and its control clients run there."""
    retry_until(lambda: reached_since(workers, host.name, since)
                and len(control_clients(host)) >= 2, 60, interval=0.3,
                message=f"not watching {host.name} since {since}")


def _ended_on(host: SshHost, pid: str) -> bool:
    return pid not in {p.split()[0] for p in host.our_processes()}


def _kill_if_there(pid: int) -> None:
    """A stopped client this test made is not left behind when the test fails (and a pid
    reused since by another program is left alone)."""
    with contextlib.suppress(OSError):
        if b"-C\0attach-session" in Path(f"/proc/{pid}/cmdline").read_bytes():
            os.kill(pid, signal.SIGKILL)


@pytest.mark.slow
def test_nothing_of_ours_stays_on_a_host_after_stops_drops_and_reconnects(
        ssh_host: Callable[[str], SshHost], server: Any, session: Any, tmp_path: Path,
        isolated_env: Path, watcher_process: Any, request: pytest.FixtureRequest) -> None:
    alpha = ssh_host("alpha")
    agent_on(alpha)
    assert alpha.tmux("new-session", "-d", "-s", "other", "cat").returncode == 0
    write_hosts(tmp_path / "config.toml", alpha)
    # The set-up's own tmux clients may still be winding down on a loaded machine.
    retry_until(lambda: alpha.our_processes() == [], STARTS_WITHIN_S, interval=0.2,
                message=f"before any watcher: {alpha.our_processes()}")
    for start in range(5):
        proc = watcher_process("--interval", str(INTERVAL), "--no-notify")
        wait_watched(isolated_env, alpha, time.time())
        if start == 1:  # the connection drops (ours killed): the watcher reconnects
            # One of our clients there cannot end by itself (stopped: as a client that tmux
            # keeps for output nobody reads any more); the watcher ends it once it is back.
            stuck = control_clients(alpha)[0].split()[0]
            os.kill(int(stuck), signal.SIGSTOP)
            request.addfinalizer(functools.partial(_kill_if_there, int(stuck)))
            since = time.time()
            assert alpha.kill_clients(sockets()) > 0
            wait_watched(isolated_env, alpha, since)
            retry_until(functools.partial(_ended_on, alpha, stuck), STARTS_WITHIN_S, interval=0.2,
                        message=f"still on alpha: {alpha.our_processes()}")
        if start == 2:  # the host restarts its sshd: every session there ends
            since = time.time()
            alpha.stop()
            alpha.start()
            wait_watched(isolated_env, alpha, since)
        stop_process(proc, seconds=20)
        try:
            # A hang guard: on a loaded machine ssh and sshd take their time to wind down.
            retry_until(lambda: alpha.our_processes() == [], STARTS_WITHIN_S, interval=0.2)
        except WaitTimeout:
            raise WaitTimeout(f"left on alpha after stop {start + 1}: "
                              f"{alpha.our_processes()}") from None
        assert proc.returncode == 0, proc.stderr.read() if proc.stderr else ""


@pytest.mark.slow
def test_one_host_down_leaves_the_other_and_this_machine_fresh(
        ssh_host: Callable[[str], SshHost], server: Any, session: Any, tmp_path: Path,
        isolated_env: Path, watcher_process: Any) -> None:
    alpha, beta = ssh_host("alpha"), ssh_host("beta")
    agent_on(alpha)
    agent_on(beta)
    session.new_window(window_name="agent", window_shell=AGENT, attach=False)
    write_hosts(tmp_path / "config.toml", alpha, beta)
    watcher_process("--interval", "2", "--no-notify")
    retry_until(lambda: {"local:agent", "alpha:agent", "beta:agent"} <= rows(server).keys()
                and not any(w["stale"] for w in rows(server).values()), 60, interval=0.3)

    # Heartbeats sampled in a thread all through the outage: the other host's and this
    # machine's never older than two intervals (plus a margin for a loaded machine).
    oldest = {"alpha": 0.0, "local": 0.0}
    sampling = threading.Event()

    def sample() -> None:
        while not sampling.wait(0.2):
            now = time.time()
            oldest["alpha"] = max(oldest["alpha"],
                                  now - hosts_table(isolated_env)["alpha"]["checked_ts"])
            reader = StoreReader(isolated_env)
            try:
                last = (reader.daemon() or {})["last_cycle_ts"]
            finally:
                reader.close()
            oldest["local"] = max(oldest["local"], now - last)

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        down = time.monotonic()
        beta.stop()
        beta.kill_clients(sockets())
        retry_until(lambda: rows(server)["beta:agent"].get("stale"), 30, interval=0.2)
        stale_after = time.monotonic() - down
        now = rows(server)
        assert now["beta:agent"]["state"] == "UNKNOWN"
        assert not now["alpha:agent"]["stale"] and not now["local:agent"]["stale"]
        up = time.monotonic()
        beta.start()
        retry_until(lambda: not rows(server)["beta:agent"].get("stale"), 60, interval=0.3)
        fresh_after = time.monotonic() - up
    finally:
        sampling.set()
        sampler.join(10)
    # The figures of the acceptance (10 s, 35 s) with room for a loaded CI machine.
    assert stale_after < 20, stale_after
    assert fresh_after < 50, fresh_after
    assert oldest["alpha"] < 2 * 2.0 + 3, oldest
    assert oldest["local"] < 2 * 2.0 + 3, oldest
    assert rows(server)["beta:agent"]["state"] == "READY"


def test_a_host_over_its_pane_cap_is_watched_up_to_the_cap(
        ssh_host: Callable[[str], SshHost], caplog: pytest.LogCaptureFixture) -> None:
    alpha = ssh_host("alpha")
    assert alpha.tmux("new-session", "-d", "-s", "many", "cat").returncode == 0
    for _ in range(5):
        assert alpha.tmux("new-window", "-d", "-t", "many", "cat").returncode == 0
    config = HostConfig("alpha", "alpha", tuple(alpha.ssh_options), max_panes=4)
    tmux = CappedTmux(config, QuietRepeats(__import__("logging").getLogger("test.cap")))
    try:
        with caplog.at_level("WARNING"):
            first = tmux.list_panes()
            again = tmux.list_panes()
    finally:
        config.via().close()
    assert len(first.panes) == len(again.panes) == 4
    assert [p.pane_id for p in first.panes] == [p.pane_id for p in again.panes]
    said = [r.getMessage() for r in caplog.records if "max_panes" in r.getMessage()]
    assert said == ["host alpha: more than 4 panes; watching the first 4 "
                    "(max_panes in [hosts.alpha])"]


class CountingFactory:
    """Builds the real watcher for a host's thread and counts its ticks."""

    def __init__(self) -> None:
        self.ticks = 0

    def __call__(self, tmux: Any, store: StoreWriter, control: Any) -> Any:
        from app.observe.pack_loading import load_packs
        from app.run.watcher import Watcher

        watcher = Watcher(tmux, store, load_packs(), WatchSettings(interval_s=INTERVAL),
                          control=control)
        real = watcher.tick

        def tick(now: float | None = None, *, full: bool = True) -> Any:
            self.ticks += 1
            return real(now, full=full)

        watcher.tick = tick  # type: ignore[method-assign]  # counted, otherwise the real one
        return watcher


@pytest.mark.parametrize("down", ["no tmux server", "no sshd"])
def test_a_host_that_answers_nothing_useful_is_not_tried_in_a_busy_loop(
        ssh_host: Callable[[str], SshHost], isolated_env: Path, down: str) -> None:
    alpha = ssh_host("alpha")  # no tmux server there
    if down == "no sshd":
        alpha.stop()
    config = HostConfig("alpha", "alpha", tuple(alpha.ssh_options))
    store = StoreWriter(isolated_env)
    stop = threading.Event()
    factory = CountingFactory()
    watch = HostWatch(config, store, WatchSettings(interval_s=INTERVAL), factory, stop,
                      QuietRepeats(__import__("logging").getLogger("test.busy")))
    watch.start()
    try:
        retry_until(lambda: factory.ticks >= 2, 30, interval=0.1)
        started, ticks = time.monotonic(), factory.ticks
        retry_until(lambda: time.monotonic() - started > 4, 10, interval=0.2)
        more = factory.ticks - ticks
    finally:
        stop.set()
        watch.join(20)
        store.close()
    # At the interval (no server: 1 s) or slower (back-off: 2, 4 … s), never more: a busy
    # loop would have made hundreds.
    assert more <= 4 / INTERVAL + 2, more
    row = hosts_table(isolated_env)["alpha"]
    if down == "no sshd":
        assert row["reachable"] == 0 and "unreachable" in row["problem"]
    else:
        assert row["reachable"] == 1 and row["problem"] == "tmux server not running"


@pytest.mark.slow
@pytest.mark.parametrize("watching", [True, False], ids=["watched", "while-stopped"])
def test_a_remote_message_for_a_pane_whose_server_restarted_is_dropped(
        ssh_host: Callable[[str], SshHost], server: Any, tmp_path: Path, isolated_env: Path,
        watcher_process: Any, watching: bool) -> None:
    from tests.front.test_cycle_cli import job, job_number

    alpha = ssh_host("alpha")
    agent_on(alpha)
    write_hosts(tmp_path / "config.toml", alpha)
    watch = watcher_process("--interval", str(INTERVAL), "--no-notify")
    retry_until(lambda: rows(server).get("alpha:agent", {}).get("state") == "READY", 60,
                interval=0.3)
    alpha.tmux("send-keys", "-t", "work:agent", "ask", "Enter")  # a dialog: the message waits
    retry_until(lambda: rows(server)["alpha:agent"]["state"] == "NEEDS_CONFIRMATION", 30,
                interval=0.2)
    seq = job_number(conductor("-L", server.socket_name, "pty", "send", "alpha:agent",
                               "--queue", "say after the restart"))
    if not watching:
        stop_process(watch, seconds=20)
    alpha.kill_tmux()
    retry_until(lambda: alpha.tmux("new-session", "-d", "-s", "work", "-n", "agent",
                                   "cat").returncode == 0, 15, interval=0.1)
    if not watching:
        watcher_process("--interval", str(INTERVAL), "--no-notify")
    retry_until(lambda: job(isolated_env, seq).get("state") == "dropped", 60, interval=0.3,
                message=f"job {seq}: {job(isolated_env, seq)}")
    assert "say after the restart" not in alpha.tmux("capture-pane", "-p", "-t",
                                                     "work:agent").stdout


@pytest.mark.slow
def test_a_host_disabled_or_removed_reads_stale_at_the_next_start_never_ready(
        ssh_host: Callable[[str], SshHost], server: Any, session: Any, tmp_path: Path,
        isolated_env: Path, watcher_process: Any) -> None:
    alpha, beta = ssh_host("alpha"), ssh_host("beta")
    agent_on(alpha)
    agent_on(beta)
    session.new_window(window_name="agent", window_shell=AGENT, attach=False)
    config = tmp_path / "config.toml"
    write_hosts(config, alpha, beta)
    watch = watcher_process("--interval", str(INTERVAL), "--no-notify")
    retry_until(lambda: all(rows(server).get(k, {}).get("state") == "READY"
                            for k in ("local:agent", "alpha:agent", "beta:agent")), 60,
                interval=0.3)
    stop_process(watch, seconds=20)
    # alpha disabled, beta gone from the config; rows of a removed host stay 30 s.
    write_hosts(config, alpha, extra="\n[states]\nexited_shown = 30\n")
    config.write_text(config.read_text().replace('ssh = "alpha"',
                                                 'ssh = "alpha"\nenabled = false'))
    watcher_process("--interval", str(INTERVAL), "--no-notify")
    retry_until(lambda: rows(server).get("local:agent", {}).get("stale") is False, 60,
                interval=0.3)
    now = rows(server)
    for key, why in (("alpha:agent", "disabled in the config"),
                     ("beta:agent", "removed from the config")):
        assert now[key]["stale"] and now[key]["state"] == "UNKNOWN", now[key]
        assert now[key]["stale_reason"] == "host_not_watched"
        assert now[key]["host_problem"] == why and not now[key]["eligible_for_herd"]
    short = conductor("-L", server.socket_name, "pty", "status", "--short").stdout
    assert "[agent@alpha: host not watched]" in short and "@beta" not in short
    done = conductor("-L", server.socket_name, "pty", "switch", "--next")
    assert "@alpha" not in done.stdout and "@beta" not in done.stdout
