"""``<workers>/<id>/status.json``: written atomically so no reader ever sees half a file."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from app.base.files import write_atomic

STATUS_FILE = "status.json"


def render(data: Mapping[str, Any]) -> str:
    return json.dumps(data, indent=2, sort_keys=False, ensure_ascii=False) + "\n"


def write_status(folder: Path, data: Mapping[str, Any], previous: str | None) -> str:
    """Write ``status.json`` in ``folder`` unless its content would not change; returns the text.

    ``previous`` is what this process last wrote; when unknown (a fresh start) the file on disk is
    read, and a truncated or foreign one is simply replaced.
    """
    text = render(data)
    path = folder / STATUS_FILE
    if previous is None and not folder.is_symlink():
        try:
            previous = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            previous = None
    if text != previous:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        if folder.is_symlink():
            # Someone replaced the pane's folder with a link: writing would land elsewhere.
            raise OSError(f"{folder} is a symbolic link; not writing through it")
        write_atomic(path, text, mode=0o600)
    return text
