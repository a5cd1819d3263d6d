"""tmux socket files of the test run: where they live, ending a server with its socket file, and
the session's account of what was left behind.

tmux never removes its socket file, not even on ``kill-server``, so a test that starts a server
must unlink the file too (``reap``). The run gets a folder of its own (``TMUX_TMPDIR``, set
before xdist starts its workers, which inherit it): every socket in it at the end is this run's,
whatever else runs on the machine, and ``leftovers`` names them.
"""

from __future__ import annotations

import errno
import os
import socket
import subprocess
import time
from pathlib import Path

ENV = "TMUX_TMPDIR"


def socket_dir() -> Path:
    """The folder tmux puts ``-L NAME`` sockets in, as tmux itself works it out."""
    return Path(os.environ.get(ENV) or "/tmp") / f"tmux-{os.geteuid()}"


def socket_path(name: str) -> Path:
    return socket_dir() / name


def has_server(path: Path) -> bool:
    """A tmux server listens on ``path`` (a file left behind refuses the connection)."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(str(path))
    except OSError as exc:
        if exc.errno in (errno.ECONNREFUSED, errno.ENOENT, errno.ENOTSOCK):
            return False
        raise
    finally:
        probe.close()
    return True


def reap(name: str, env: dict[str, str] | None = None) -> None:
    """End the tmux server on socket ``name`` (if any) and remove its socket file; safe to
    repeat, and quiet when there is nothing to end."""
    subprocess.run(["tmux", "-L", name, "kill-server"], capture_output=True, check=False,
                   timeout=30, env=env)
    path = Path((env or os.environ).get(ENV) or "/tmp") / f"tmux-{os.geteuid()}" / name
    path.unlink(missing_ok=True)


def leftovers(folder: Path, grace_s: float = 10.0) -> tuple[list[str], list[str]]:
    """(socket files in ``folder`` with no server, sockets whose server still runs). A server
    told to end a moment ago may still be on its way out: it gets ``grace_s`` to go."""
    if not folder.is_dir():
        return [], []
    deadline = time.monotonic() + grace_s
    while True:
        files = sorted(p for p in folder.iterdir())
        live = [p for p in files if has_server(p)]
        if not live or time.monotonic() >= deadline:
            break
        time.sleep(0.2)
    return [p.name for p in files if p not in live], [p.name for p in live]
