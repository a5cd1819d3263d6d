"""Everything the watcher may import later, imported when it starts.

`scripts/install.sh` run beside a running watcher replaces the installed package under it (a copy
becomes an editable install, or the other way round): an import made after that finds the new
files, or none at all, and a queued message or a cycle directive failed halfway with an
ImportError while `status` looked normal. Imported at start, a module stays the one loaded.
"""

from __future__ import annotations

import importlib
import pkgutil

# Imported inside functions somewhere below app/ (grep for indented imports), and what they
# import in turn only when first used.
_LIBRARIES = (
    "email.utils", "json", "libtmux", "libtmux.exc", "regex", "requests", "sqlite_utils",
    "sqlite_utils.migrations", "tomlkit", "unicodedata", "yaml", "dotenv",
)
# The front (the CLI is loaded already; the MCP server needs an optional extra) and the
# entry points are not the watcher's.
_NOT_THE_WATCHERS = ("app.front", "app.__main__", "app.entry")


def import_everything() -> list[str]:
    """Import every module of app/ the watcher can reach and the libraries they load lazily;
    the names that could not be imported, each with why."""
    import app

    failed: list[str] = []
    names = [info.name for info in pkgutil.walk_packages(app.__path__, "app.")
             if not info.name.startswith(_NOT_THE_WATCHERS)]
    for name in (*names, *_LIBRARIES):
        try:
            importlib.import_module(name)
        except ImportError as exc:
            failed.append(f"{name} ({exc})")
    return failed
