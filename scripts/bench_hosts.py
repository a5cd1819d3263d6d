"""The several-hosts figures of scripts/bench.py (its `hosts` section), against real sshd on
loopback (tests/hosts/sshd.py), each with its own tmux server:

- remote question -> NEEDS_CONFIRMATION and remote turn end -> READY, beside the same on this
  machine's tmux in the same run (control mode over ssh, every default);
- CPU per minute of the watcher (its process tree: its ssh clients and control clients included,
  and the ssh masters of the shared connections),
  of the sshd serving it and of the remote tmux servers, for 3 hosts x 20 idle panes and for one
  host with 5 panes printing nonstop;
- ssh processes per host: the shared connection (its master) and the clients on it;
- at scale, 10 hosts x 50 idle panes: a remote question -> NEEDS_CONFIRMATION beside a local
  one, and the CPU per minute of the watcher, the sshd and the remote tmux servers.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from tests.hosts.sshd import SshHost, keygen, short_folder

REPO = Path(__file__).resolve().parent.parent

PRINTER = "sh -c 'while :; do date; sleep 0.05; done'"
# The stand-in Claude Code of the tests: `work S` is a turn of S seconds ending at its prompt.
AGENT = f"{sys.executable} {REPO / 'tests' / 'support' / 'fake_agent.py'}"
SHELL = "env PS1='$ ' sh"


def host_state(db: Path, host: str, name: str) -> str | None:
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as conn:
            row = conn.execute("SELECT s.state FROM status s JOIN ptys p ON p.id = s.id "
                               "WHERE p.host = ? AND p.name = ?", (host, name)).fetchone()
    except sqlite3.Error:
        return None
    return row[0] if row else None


def wait_for(condition: Callable[[], bool], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.01)
    return condition()


@contextmanager
def lab(hosts: int, panes: int, streaming: int = 0, agent: bool = False
        ) -> Iterator[tuple[list[SshHost], Path, str]]:
    """``hosts`` sshd with ``panes`` shells each (the first ``streaming`` of the first host
    printing nonstop), a local tmux server with one shell, a config naming the hosts, a store;
    with ``agent``, a window "agent" running the fake agent on every host and locally."""
    with ExitStack() as stack:
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="cpb-")))
        key = folder / "client_key"
        pub = keygen(key)
        started: list[SshHost] = []
        stack.callback(stop_all, started)
        for index in range(hosts):
            host = SshHost(f"h{index}", folder / f"h{index}", key, pub).start()
            started.append(host)
            host.tmux("-f", "/dev/null", "new-session", "-d", "-s", "bench", "-n", "w0",
                      "-x", "160", "-y", "40", SHELL)
            for pane in range(1, panes):
                host.tmux("new-window", "-d", "-t", "bench", "-n", f"w{pane}", SHELL)
            for pane in range(streaming if index == 0 else 0):
                host.tmux("respawn-window", "-k", "-t", f"bench:w{pane}", PRINTER)
            if agent:
                host.tmux("new-window", "-d", "-t", "bench", "-n", "agent", AGENT)
        socket = f"bench-hosts-{os.getpid()}"
        subprocess.run(["tmux", "-L", socket, "-f", "/dev/null", "new-session", "-d", "-s",
                        "bench", "-n", "w0", "-x", "160", "-y", "40", SHELL], check=True)
        stack.callback(lambda: subprocess.run(["tmux", "-L", socket, "kill-server"],
                                              check=False))
        if agent:
            subprocess.run(["tmux", "-L", socket, "new-window", "-d", "-t", "bench", "-n",
                            "agent", AGENT], check=True)
        config = folder / "config.toml"
        config.write_text("[notify]\nstates = []\n\n" + "".join(
            f'[hosts.{h.name}]\nssh = "{h.name}"\nssh_options = ["-F", "{h.client_config}"]\n\n'
            for h in started), encoding="utf-8")
        os.environ["XDG_RUNTIME_DIR"] = short_folder(folder)
        yield started, config, socket


@contextmanager
def watching(config: Path, socket: str) -> Iterator[tuple[subprocess.Popen[bytes], Path]]:
    store = config.parent / "store"
    env = {**os.environ, "CONDUCTOR_WORKERS_DIR": str(store), "CONDUCTOR_CONFIG": str(config)}
    env.pop("OPENROUTER_API_KEY", None)
    daemon = subprocess.Popen([sys.executable, "-m", "app", "-L", socket, "pty", "watch", "-q"],
                              env=env, cwd=REPO)
    try:
        yield daemon, store / "status.db"
    finally:
        daemon.terminate()
        daemon.wait(timeout=30)


def stop_all(hosts: list[SshHost]) -> None:
    for host in hosts:
        host.stop()
        host.kill_tmux()


def in_state(db: Path, where: str, name: str, state: str) -> Callable[[], bool]:
    """Whether ``name`` on ``where`` is in ``state`` in the store, as a condition to wait for."""
    return lambda: host_state(db, where, name) == state


def latencies(trials: int) -> dict[str, list[float]]:
    """Per (where, what): seconds from the screen to the state in the store."""
    found: dict[str, list[float]] = {}
    with lab(1, 1, agent=True) as (hosts, config, socket), watching(config, socket) as (_, db):
        alpha = hosts[0]
        local_tmux: Callable[..., object] = lambda *a: subprocess.run(  # noqa: E731
            ["tmux", "-L", socket, *a], check=True)
        places = (("local", local_tmux), (alpha.name, alpha.tmux))
        for where, _ in places:
            for name in ("w0", "agent"):
                wait_for(in_state(db, where, name, "READY"), 90)
        for trial in range(trials):
            for where, run in places:
                time.sleep(0.3 + (trial * 0.37) % 1.0)
                started = time.monotonic()
                run("send-keys", "-t", "bench:w0", "read -p 'Go on? (y/N) ' x", "Enter")
                seen = wait_for(in_state(db, where, "w0", "NEEDS_CONFIRMATION"),
                                30)
                found.setdefault(f"{where} question", []).append(
                    time.monotonic() - started if seen else float("inf"))
                run("send-keys", "-t", "bench:w0", "n", "Enter")
                wait_for(in_state(db, where, "w0", "READY"), 30)
                # A turn of the agent: 1 s of work, then its idle prompt.
                run("send-keys", "-t", "bench:agent", "work 1", "Enter")
                ends = time.monotonic() + 1.0
                wait_for(in_state(db, where, "agent", "BUSY"), 10)
                seen = wait_for(in_state(db, where, "agent", "READY"), 30)
                found.setdefault(f"{where} turn end", []).append(
                    time.monotonic() - ends if seen else float("inf"))
    return found


def descendants_cpu(root: int) -> float:
    from scripts.bench import tree_cpu

    return tree_cpu(root)


def tmux_server_cpu(host: SshHost) -> float:
    from scripts.bench import proc_cpu

    pid = host.tmux("display-message", "-p", "#{pid}").stdout.strip()
    return proc_cpu(int(pid)) if pid.isdigit() else 0.0


def master_pid(host: SshHost) -> int:
    """The pid of the shared connection's master (``ssh -O check`` names it), 0 for none."""
    from app.adapters.ssh import SshVia

    via = SshVia(host.name, host.name, tuple(host.ssh_options))
    check = subprocess.run([*via.base_argv()[:-3], "-O", "check", "--", host.name],
                           capture_output=True, text=True, check=False)
    return int(check.stderr.split("pid=")[1].split(")")[0]) if "pid=" in check.stderr else 0


def ssh_processes(host: SshHost) -> tuple[int, int]:
    """(masters, clients): the shared connection's master and the ssh processes on it that
    carry the host's ssh_config (control clients, calls in flight)."""
    master = master_pid(host)
    clients = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == master:
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv[0].split(b"/")[-1] == b"ssh" and str(host.client_config).encode() in argv:
            clients += 1
    return (1 if master else 0), clients


def cost(hosts: int, panes: int, streaming: int, seconds: float
         ) -> tuple[float, float, float, list[tuple[int, int]]]:
    """(watcher, sshd, remote tmux servers) CPU s/min, and (masters, clients) per host."""
    with lab(hosts, panes, streaming) as (started, config, socket), \
            watching(config, socket) as (daemon, db):
        def listed() -> bool:
            try:
                with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as conn:
                    return int(conn.execute("SELECT count(*) FROM ptys WHERE host != 'local'"
                                            ).fetchone()[0]) >= hosts * panes
            except sqlite3.Error:
                return False

        wait_for(listed, 120)
        time.sleep(8)  # past the first polls and the settling

        def sshd() -> float:
            return sum(descendants_cpu(h.proc.pid) for h in started if h.proc is not None)

        def servers() -> float:
            return sum(tmux_server_cpu(h) for h in started)

        masters = [master_pid(h) for h in started]

        def mine() -> float:  # the masters are ssh's own daemons, not the watcher's children
            return descendants_cpu(daemon.pid) + sum(descendants_cpu(m) for m in masters if m)

        ours, serving, tmuxes = mine(), sshd(), servers()
        begun = time.monotonic()
        time.sleep(seconds)
        elapsed = (time.monotonic() - begun) / 60
        figures = ((mine() - ours) / elapsed, (sshd() - serving) / elapsed,
                   (servers() - tmuxes) / elapsed)
        return (*figures, [ssh_processes(h) for h in started])


def scale(hosts: int, panes: int, trials: int, seconds: float
          ) -> tuple[dict[str, list[float]], tuple[float, ...], float]:
    """``hosts`` hosts x ``panes`` idle shells: y/N question -> NEEDS_CONFIRMATION on the first
    host's first pane and on this machine's (s, per trial), then CPU s/min over ``seconds`` of
    (the watcher process itself, its children: ssh calls and control clients, the ssh masters,
    the sshd serving them, the remote tmux servers); and how long the first listing of every
    pane took (s)."""
    found: dict[str, list[float]] = {}
    with lab(hosts, panes) as (started, config, socket), \
            watching(config, socket) as (daemon, db):
        def listed() -> bool:
            try:
                with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as conn:
                    return int(conn.execute("SELECT count(*) FROM ptys WHERE host != 'local'"
                                            ).fetchone()[0]) >= hosts * panes
            except sqlite3.Error:
                return False

        begun = time.monotonic()
        wait_for(listed, 300)
        first_listing = time.monotonic() - begun
        first = started[0]
        local_tmux: Callable[..., object] = lambda *a: subprocess.run(  # noqa: E731
            ["tmux", "-L", socket, *a], check=True)
        places = (("local", local_tmux), (first.name, first.tmux))
        for where, _ in places:
            wait_for(in_state(db, where, "w0", "READY"), 120)
        for trial in range(trials):
            for where, run in places:
                time.sleep(0.3 + (trial * 0.37) % 1.0)
                asked = time.monotonic()
                run("send-keys", "-t", "bench:w0", "read -p 'Go on? (y/N) ' x", "Enter")
                seen = wait_for(in_state(db, where, "w0", "NEEDS_CONFIRMATION"), 30)
                found.setdefault(f"{where} question", []).append(
                    time.monotonic() - asked if seen else float("inf"))
                run("send-keys", "-t", "bench:w0", "n", "Enter")
                wait_for(in_state(db, where, "w0", "READY"), 30)
        masters = [master_pid(h) for h in started]

        def parts() -> tuple[float, ...]:
            own = own_cpu(daemon.pid)
            return (own, descendants_cpu(daemon.pid) - own,
                    sum(descendants_cpu(m) for m in masters if m),
                    sum(descendants_cpu(h.proc.pid) for h in started if h.proc is not None),
                    sum(tmux_server_cpu(h) for h in started))

        before = parts()
        begun = time.monotonic()
        time.sleep(seconds)
        minutes = (time.monotonic() - begun) / 60
        return found, tuple((b - a) / minutes for a, b in zip(before, parts(), strict=True)), \
            first_listing


def own_cpu(pid: int) -> float:
    """CPU seconds of the process itself (its threads), not of its children."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return sum(int(f) for f in fields[11:13]) / os.sysconf("SC_CLK_TCK")


def remote_usage(files: int, lines: int, ticks: int) -> dict[str, float]:
    """Reading ``files`` Claude transcripts of ``lines`` lines on one host over ssh on loopback
    (app.adapters.remote_tails, as a host's watcher does each tick): ms of the first read, and
    per tick once caught up and with one new line in each file: wall, CPU of ours (this
    process, its ssh clients, the shared connection's master) and of the sshd serving it (the
    shell and ``ls`` it runs included), and ssh calls."""
    import json
    import resource

    from app.adapters.remote_tails import RemoteTails
    from app.adapters.ssh import HostConfig
    from app.adapters.usage_files import Tail
    from scripts.bench import proc_cpu

    def line(no: int) -> str:
        return json.dumps({"type": "assistant", "timestamp": "2026-11-28T02:31:00.000Z",
                           "message": {"id": f"msg_{no}", "model": "claude-opus-4-5",
                                       "content": [{"type": "text", "text": "x" * 400}],
                                       "usage": {"input_tokens": 100, "output_tokens": 40}}})

    def mine() -> float:
        used = [resource.getrusage(who) for who in (resource.RUSAGE_SELF,
                                                     resource.RUSAGE_CHILDREN)]
        master = master_pid(host)
        return sum(u.ru_utime + u.ru_stime for u in used) + (proc_cpu(master) if master else 0)

    with ExitStack() as stack:
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="cpu-")))
        key = folder / "client_key"
        host = SshHost("u0", folder / "u0", key, keygen(key)).start()
        stack.callback(stop_all, [host])
        paths = [host.home / f"session-{i}.jsonl" for i in range(files)]
        for path in paths:
            path.write_text("".join(line(n) + "\n" for n in range(lines)))
        via = HostConfig(host.name, host.name, tuple(host.ssh_options)).via()
        stack.callback(via.close)
        read = RemoteTails(via)
        tails = [Tail(str(p), "claude") for p in paths]
        figures: dict[str, float] = {}
        assert host.proc is not None
        sshd_pid = host.proc.pid
        started = time.perf_counter()
        for _ in range(100):  # a first read past the per-call limit takes a few calls
            read(tails)
            if all(t.offset == p.stat().st_size for t, p in zip(tails, paths, strict=True)):
                break
        figures["first_ms"] = (time.perf_counter() - started) * 1000
        figures["first_calls"] = read.calls
        for label, grow in (("caught_up", False), ("one_line", True)):
            calls, cpu, sshd = read.calls, mine(), descendants_cpu(sshd_pid)
            wall = 0.0
            for tick in range(ticks):
                if grow:
                    for path in paths:
                        with path.open("a") as f:
                            f.write(line(lines + tick) + "\n")
                started = time.perf_counter()
                read(tails)
                wall += time.perf_counter() - started
            figures[f"{label}_wall_ms"] = wall * 1000 / ticks
            figures[f"{label}_ours_ms"] = (mine() - cpu) * 1000 / ticks
            figures[f"{label}_sshd_ms"] = (descendants_cpu(sshd_pid) - sshd) * 1000 / ticks
            figures[f"{label}_calls"] = (read.calls - calls) / ticks
        return figures
