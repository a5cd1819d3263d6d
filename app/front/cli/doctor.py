"""``conductor pty doctor``: tmux, the store and its watcher, the agents' hooks and MCP server,
the hosts and the notification receivers, checked at once (app.run.doctor); exit 1 when any
check fails.

Registered on the ``pty`` group by ``app.front.cli.main``.
"""

from __future__ import annotations

import sys
from dataclasses import asdict

import click

from app.front.cli.context import Context, echo_clean, friendly_errors, read_config
from app.front.cli.output import emit


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Every check as one JSON object.")
@click.pass_obj
@friendly_errors
def doctor(obj: Context, as_json: bool) -> None:
    """Check what conductor relies on: tmux and its options, the store and the watcher, hooks
    and MCP per agent CLI, the hosts, notifications. Each problem is one line; exit 1 if any."""
    from app.run.doctor import run_checks

    checks = run_checks(obj.tmux(), obj.workers_dir, read_config())
    ok = all(check.ok for check in checks)
    if as_json:
        emit({"ok": ok, "checks": [asdict(check) for check in checks]})
    else:
        for check in checks:
            echo_clean(check.line())  # a host's or a settings file's words among them
        failed = sum(1 for check in checks if not check.ok)
        click.echo("all checks passed" if ok else f"{failed} check{'s' if failed > 1 else ''} "
                   "failed")
    if not ok:
        sys.exit(1)
