"""A real OpenSSH server on loopback for the several-hosts tests, run as the current user.

Each ``SshHost`` has its own host key, an authorized client key made in the test's temp folder and
``SetEnv TMUX_TMPDIR=… HOME=…`` so every login to it reaches that host's own tmux server and
home: two hosts on one machine then look like two machines to conductor (pane ids collide, as on
real ones). The client
side is an ssh_config file (``ssh -F``) with the host key pinned in its own known_hosts.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
from pathlib import Path

from tests.support.waiting import retry_until, stop_process

SSHD = shutil.which("sshd") or "/usr/sbin/sshd"


class SshUnavailable(RuntimeError):
    pass


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def keygen(path: Path) -> str:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "conductor-test",
                    "-f", str(path)], check=True, capture_output=True)
    return path.with_suffix(".pub").read_text(encoding="utf-8").strip()


class SshHost:
    """One sshd on 127.0.0.1, its own tmux folder, and the client config that reaches it."""

    def __init__(self, name: str, root: Path, client_key: Path, client_pub: str,
                 extra: tuple[str, ...] = ()) -> None:
        if not Path(SSHD).exists():
            raise SshUnavailable("sshd not found (Debian package: openssh-server)")
        self.name = name
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self.tmux_dir = root / "tmux"
        self.tmux_dir.mkdir(mode=0o700, exist_ok=True)
        # Its own home: the host's settings files are its own, and the login shell reads no rc
        # of this machine's user (bash sources ~/.bashrc for every command sshd runs).
        self.home = root / "home"
        self.home.mkdir(exist_ok=True)
        self.port = free_port()
        host_pub = keygen(root / "host_key")
        (root / "authorized_keys").write_text(client_pub + "\n", encoding="utf-8")
        self.known_hosts = root / "known_hosts"
        key_type, key_body = host_pub.split()[:2]
        self.known_hosts.write_text(f"[127.0.0.1]:{self.port} {key_type} {key_body}\n",
                                    encoding="utf-8")
        self.config = root / "sshd_config"
        self.config.write_text("\n".join([
            f"Port {self.port}",
            "ListenAddress 127.0.0.1",
            f"HostKey {root / 'host_key'}",
            f"AuthorizedKeysFile {root / 'authorized_keys'}",
            f"PidFile {root / 'sshd.pid'}",
            "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            "PubkeyAuthentication yes",
            # As root in a container: no PAM stack, a temp folder of any mode, root may log in.
            "UsePAM no",
            "StrictModes no",
            "PermitRootLogin prohibit-password",
            f"SetEnv TMUX_TMPDIR={self.tmux_dir} HOME={self.home}",
            "LogLevel ERROR",
            *extra,
            "",
        ]), encoding="utf-8")
        self.client_config = root / "ssh_config"
        self.client_config.write_text("\n".join([
            f"Host {name}",
            "  HostName 127.0.0.1",
            f"  Port {self.port}",
            f"  User {os.environ.get('USER') or _user()}",
            f"  IdentityFile {client_key}",
            "  IdentitiesOnly yes",
            f"  UserKnownHostsFile {self.known_hosts}",
            "  StrictHostKeyChecking yes",
            "  LogLevel ERROR",
            "",
        ]), encoding="utf-8")
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = root / "sshd.log"

    def start(self) -> SshHost:
        if os.geteuid() == 0:
            Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege separation
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(self.config)],
                                         stdout=log, stderr=log, stdin=subprocess.DEVNULL)
        retry_until(self._accepts, 15, interval=0.05,
                    message=f"sshd {self.name} did not listen: {self.log.read_text()[-500:]}")
        return self

    def _accepts(self) -> bool:
        if self.proc is not None and self.proc.poll() is not None:
            raise SshUnavailable(f"sshd exited: {self.log.read_text()[-500:]}")
        with socket.socket() as probe:
            return probe.connect_ex(("127.0.0.1", self.port)) == 0

    def stop(self) -> None:
        """Kill sshd; connections it already accepted end too (their session processes belong
        to it: a killed host drops every link, as a machine gone off the network would)."""
        if self.proc is None:
            return
        sessions = descendants(self.proc.pid)
        stop_process(self.proc, seconds=5)
        for pid in sessions:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.proc = None

    @property
    def ssh_options(self) -> list[str]:
        return ["-F", str(self.client_config)]

    def ssh(self, *remote: str, timeout: float = 20) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["ssh", *self.ssh_options, "-o", "BatchMode=yes", self.name,
                               *remote], capture_output=True, text=True, timeout=timeout,
                              check=False)

    def tmux_env(self) -> dict[str, str]:
        """The environment that reaches this host's tmux server from this machine directly."""
        env = {k: v for k, v in os.environ.items() if k not in ("TMUX", "TMUX_PANE")}
        env["TMUX_TMPDIR"] = str(self.tmux_dir)
        return env

    def tmux(self, *args: str) -> subprocess.CompletedProcess[str]:
        """Run tmux on this host's server directly (test set-up, not what conductor does)."""
        return subprocess.run(["tmux", *args], capture_output=True, text=True, timeout=20,
                              env=self.tmux_env(), check=False)

    def kill_tmux(self) -> None:
        self.tmux("kill-server")

    def our_processes(self) -> list[str]:
        """Processes conductor runs on this host (its sessions under sshd, and anything that
        outlived one: every login here has this host's TMUX_TMPDIR), as "PID CMDLINE"; the
        host's tmux server and its panes are the person's, not ours."""
        server = self.tmux("display-message", "-p", "#{pid}").stdout.strip()
        theirs = {int(server), *descendants(int(server))} if server.isdecimal() else set()
        marker = f"TMUX_TMPDIR={self.tmux_dir}".encode()
        sessions = set(descendants(self.proc.pid)) if self.proc is not None else set()
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdecimal() or int(entry.name) in theirs:
                continue
            try:
                environ = (entry / "environ").read_bytes().split(b"\0")
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").strip()
                parent = (entry / "stat").read_text().rsplit(")", 1)[1].split()[1]
            except OSError:
                continue
            if (marker in environ or int(entry.name) in sessions) and cmdline:
                found.append(f"{entry.name} (parent {parent}) "
                             f"{cmdline.decode(errors='replace')}")
        return sorted(found)

    def kill_clients(self, sockets: str) -> int:
        """Kill this machine's ssh processes to this host (the shared connection, whose
        control socket is in the folder ``sockets``, and the sessions over it), as a dropped
        network would end them; how many there were."""
        config = str(self.client_config).encode()
        pids = set()
        check = subprocess.run(["ssh", *self.ssh_options, "-o", f"ControlPath={sockets}/%C",
                                "-O", "check", self.name], capture_output=True, text=True,
                               timeout=20, check=False)
        master = check.stderr.partition("(pid=")[2].partition(")")[0]
        if master.isdecimal():
            pids.add(int(master))
        for entry in Path("/proc").iterdir():
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if argv and argv[0].endswith(b"ssh") and config in argv:
                pids.add(int(entry.name))
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        return len(pids)


def short_folder(tmp_path: Path) -> str:
    """A 0700 folder for ssh's control sockets with a short path (a socket path must stay under
    108 bytes, and pytest's temp folders are long): a link from the test's folder records it."""
    link = tmp_path / "sockets"
    if link.is_symlink():
        return str(link.readlink())
    folder = tempfile.mkdtemp(prefix="cps-")
    link.symlink_to(folder)
    return folder


def descendants(root: int) -> list[int]:
    """Every process below ``root`` (its connections' sshd and their children), from /proc."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(parent, []).append(int(entry.name))
    found: list[int] = []
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _user() -> str:
    import pwd

    return pwd.getpwuid(os.getuid()).pw_name
