"""What ``--json`` prints, the same way for every command: each document carries
``schema_version`` (design/json.md), so a script can refuse a shape it does not know instead of
misreading it.

A command prints one object (:func:`emit`), one object per line (:func:`emit_line`, for output
that keeps coming with ``-f``), or a list whose every row carries the version
(:func:`emit_rows`: the lists ``status``, ``queue``, ``herd list`` and ``restore`` printed
before there was a version stay lists, so ``jq '.[]'`` keeps working).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import click

SCHEMA_VERSION = 1


def versioned(document: Mapping[str, Any]) -> dict[str, Any]:
    """The document with ``schema_version`` first (a row that had one keeps ours)."""
    return {"schema_version": SCHEMA_VERSION, **{k: v for k, v in document.items()
                                                 if k != "schema_version"}}


def emit(document: Mapping[str, Any]) -> None:
    click.echo(json.dumps(versioned(document), indent=2, ensure_ascii=False))


def emit_line(document: Mapping[str, Any]) -> None:
    click.echo(json.dumps(versioned(document), ensure_ascii=False))


def emit_rows(rows: Iterable[Mapping[str, Any]]) -> None:
    click.echo(json.dumps([versioned(row) for row in rows], indent=2, ensure_ascii=False))


def wants_json(argv: Sequence[str]) -> bool:
    """``--json`` among the options (not in a text typed after ``--``): errors then go to
    stderr as JSON too."""
    options = argv[:argv.index("--")] if "--" in argv else argv
    return "--json" in options


def error_document(message: str, code: int) -> str:
    """The one line a failed ``--json`` command prints on stderr; ``code`` is its exit status
    (2: the command line was wrong, 1: anything else)."""
    return json.dumps({"schema_version": SCHEMA_VERSION, "error": message, "code": code},
                      ensure_ascii=False)
