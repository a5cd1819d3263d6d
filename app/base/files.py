"""Replacing a file so that no reader ever sees half of it: status.json, our config file and
the agent CLIs' settings files all go through here."""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path


def write_atomic(path: Path, text: str, mode: int | None = None, sync: bool = True) -> None:
    """Temp file in the same folder, fsync, then rename over ``path`` (atomic on POSIX).

    ``mode`` sets the permissions (default: the umask's). ``sync=False`` skips the fsync, for a
    file rewritten every few seconds whose loss in a crash costs nothing. A file that already
    exists keeps its owner where we may set it (root editing a user's settings). Two writers
    racing with the same text lose nothing: the later rename wins with identical content.
    """
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    temp = Path(name)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as stream:
            stream.write(text)
            stream.flush()
            if mode is not None:
                os.fchmod(stream.fileno(), mode)
            with contextlib.suppress(OSError):
                # lstat: the owner of a link planted in our place must not be copied.
                st = path.lstat()
                if not stat.S_ISLNK(st.st_mode):
                    os.fchown(stream.fileno(), st.st_uid, st.st_gid)
            if sync:
                os.fsync(stream.fileno())
        temp.replace(path)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
