"""The only module that runs ssh: how conductor reaches the tmux server (and a check, a settings
file) of another host, with nothing of ours installed there.

Every remote command is an argv that we quote here, argument by argument (``shlex.quote``), into
the one command line ssh hands the remote login shell: no shell string of ours, and a name or a
text holding ``;``, ``$()``, quotes or newlines arrives as the one argument it was. Text to type
never rides on the command line at all (tmux reads it from stdin).

All calls to one host share one connection (OpenSSH multiplexing: ``ControlMaster=auto`` with
the sockets in a 0700 folder of ours, kept ``ControlPersist`` seconds after the last call), and
none may ask anything (``BatchMode``): under the watcher a prompt would hang forever. Everything
else (host keys, users, jump hosts, keys) stays the user's ssh configuration; ``ssh_options`` from
the config file come before our defaults, so the person's choice wins where ssh takes the first.
"""

from __future__ import annotations

import os
import shlex
import stat
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from app.adapters.tmux import Tmux, Via
from app.base.errors import ConfigError, HostUnreachable, TmuxError

SSH = "ssh"
# How long an idle shared connection stays up after the last call (seconds).
CONTROL_PERSIST_S = 120
CONNECT_TIMEOUT_S = 5
# ssh itself exits with this status when it, not the remote command, failed.
SSH_FAILED = 255
# Panes of one host watched at most (``max_panes`` of its table): the rest are not listed.
DEFAULT_MAX_PANES = 500


def control_dir() -> str:
    """The private folder for the multiplexing sockets: ``$XDG_RUNTIME_DIR/conductor-pty-ssh``,
    else one in the temp folder named by our uid; created 0700, refused when someone else owns it
    or others may enter it (a socket there is a live login to the host)."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    base = Path(runtime) if runtime and Path(runtime).is_dir() else Path(tempfile.gettempdir())
    path = base / f"conductor-pty-ssh-{os.getuid()}"
    try:
        path.mkdir(0o700)
    except FileExistsError:
        pass
    except OSError as exc:
        raise ConfigError(f"cannot make the ssh socket folder {path}: {exc.strerror}") from None
    info = path.lstat()
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
        raise ConfigError(f"{path} must be a folder of yours with mode 0700 (it holds ssh "
                          "connection sockets); remove it or fix its mode")
    return str(path)


def remote_command(argv: Sequence[str]) -> str:
    """The one command line for the remote login shell (POSIX quoting: sh, bash, zsh, dash)."""
    if not argv:
        raise TmuxError("empty remote command")
    for arg in argv:
        if "\0" in arg:
            raise TmuxError("a remote command argument holds a NUL byte")
    return shlex.join(argv)


def run_on(via: Via, argv: Sequence[str], *, timeout: float) -> subprocess.CompletedProcess[bytes]:
    """Run ``argv`` on ``via``'s host, its output as bytes; :class:`HostUnreachable` when ssh
    could not reach the host or the host did not answer within ``timeout`` seconds."""
    try:
        done = subprocess.run(via.wrap(argv), capture_output=True, timeout=timeout,
                              check=False, stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        raise HostUnreachable("ssh is not installed (no 'ssh' on PATH)") from None
    except subprocess.TimeoutExpired:
        raise HostUnreachable(f"host {via.host} did not answer within {timeout:g} s") from None
    failed = via.failure(done.returncode, done.stderr.decode(errors="replace"))
    if failed is not None:
        raise failed
    return done


def _one_line(text: str) -> str:
    return " ".join(text.split())[:300]


@dataclass(frozen=True)
class SshVia:
    """One configured host, reached with ssh: the ``via`` of ``app.adapters.tmux.Tmux``."""

    host: str  # the name in the config file
    destination: str  # anything ssh accepts, an ~/.ssh/config alias included
    options: tuple[str, ...] = ()
    sockets: str = ""  # the control socket folder; "" for control_dir()

    def base_argv(self, *, tty: bool = False, batch: bool = True) -> list[str]:
        folder = self.sockets or control_dir()
        return [
            SSH,
            # First, so nothing in the user's options can turn prompts back on under the watcher.
            *(["-o", "BatchMode=yes"] if batch else []),
            *self.options,
            "-o", "ControlMaster=auto",
            "-o", f"ControlPath={Path(folder) / '%C'}",
            "-o", f"ControlPersist={CONTROL_PERSIST_S}",
            "-o", f"ConnectTimeout={CONNECT_TIMEOUT_S}",
            "-o", "ServerAliveInterval=5",
            "-o", "ServerAliveCountMax=3",
            "-t" if tty else "-T",
            "--", self.destination,
        ]

    def wrap(self, argv: Sequence[str]) -> list[str]:
        return [*self.base_argv(), remote_command(argv)]

    def interactive(self, argv: Sequence[str]) -> list[str]:
        """A command line for a person's terminal (a terminal on the remote side; ssh may ask
        for a passphrase there)."""
        return [*self.base_argv(tty=True, batch=False), remote_command(argv)]

    def failure(self, returncode: int, stderr: str) -> TmuxError | None:
        if returncode != SSH_FAILED:
            return None
        return HostUnreachable(f"host {self.host} ({self.destination}) unreachable: "
                               f"{_one_line(stderr) or 'ssh failed'}")

    def run(self, argv: Sequence[str], *, timeout: float = 30.0, stdin: str | None = None
            ) -> subprocess.CompletedProcess[str]:
        """Run ``argv`` on the host; :class:`HostUnreachable` when ssh could not."""
        try:
            done = subprocess.run(self.wrap(argv), capture_output=True, text=True,
                                  errors="replace", timeout=timeout, check=False, input=stdin,
                                  stdin=subprocess.DEVNULL if stdin is None else None)
        except FileNotFoundError:
            raise HostUnreachable("ssh is not installed (no 'ssh' on PATH)") from None
        except subprocess.TimeoutExpired:
            raise HostUnreachable(f"host {self.host} did not answer within {timeout:g} s"
                                  ) from None
        failed = self.failure(done.returncode, done.stderr)
        if failed is not None:
            raise failed
        return done

    def latency(self) -> float:
        """Seconds for one command's round trip (``true``) over the shared connection."""
        started = time.monotonic()
        self.run(["true"], timeout=CONNECT_TIMEOUT_S * 3)
        return time.monotonic() - started

    def close(self) -> None:
        """End the shared connection now (else it ends ``ControlPersist`` seconds after the last
        call)."""
        folder = self.sockets or control_dir()
        subprocess.run([SSH, *self.options, "-o", f"ControlPath={Path(folder) / '%C'}",
                        "-O", "exit", "--", self.destination], capture_output=True,
                       timeout=10, check=False, stdin=subprocess.DEVNULL)


@dataclass(frozen=True)
class HostConfig:
    """One ``[hosts.NAME]`` table of the config file."""

    name: str
    ssh: str  # the destination
    ssh_options: tuple[str, ...] = ()
    socket: str = ""  # the remote ``tmux -L``; "" for its default server
    enabled: bool = True
    max_panes: int = DEFAULT_MAX_PANES

    def via(self, sockets: str = "") -> SshVia:
        return SshVia(self.name, self.ssh, self.ssh_options, sockets)

    def tmux(self, sockets: str = "") -> Tmux:
        return Tmux(socket_name=self.socket or None, via=self.via(sockets))
