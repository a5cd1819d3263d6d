"""The workers' folders (one per pane, named by its worker id, holding its status.json): which
there are, the final file of a pane that is gone, and removing one."""

from __future__ import annotations

import logging
import re
import shutil
from pathlib import Path

from app.adapters import statusfile
from app.adapters.store_read import public_row
from app.run.rows import FinalRow

log = logging.getLogger(__name__)

WORKER_ID_RE = re.compile(r"^[0-9a-f]{10}$")


def folders(workers_dir: Path) -> set[str]:
    try:
        return {p.name for p in workers_dir.iterdir()
                if p.is_dir() and WORKER_ID_RE.match(p.name)}
    except OSError:
        return set()


def remove_folder(workers_dir: Path, wid: str) -> None:
    if WORKER_ID_RE.match(wid):
        folder = workers_dir / wid
        if folder.is_symlink():
            folder.unlink(missing_ok=True)  # the link itself, never what it points at
        else:
            shutil.rmtree(folder, ignore_errors=True)


def write_final_file(workers_dir: Path, final: FinalRow) -> None:
    folder = workers_dir / final.worker_id
    try:
        statusfile.write_status(folder, public_row(final.public), None)
    except OSError as exc:
        log.error("cannot write %s: %s", folder / statusfile.STATUS_FILE, exc)
