"""``conductor pty stop``, ``logs`` and ``service install|uninstall|status``: keeping the watcher
running. Parse, call app.install.service, print.

Registered on the ``pty`` group by ``app.front.cli.main``; ``watch --stop`` shares ``stop``'s
helper.
"""

from __future__ import annotations

import os

import click

from app.base.errors import ConductorError
from app.front.cli.context import MAX_ROWS, Context, conductor_program, friendly_errors


@click.command("stop")
@click.pass_obj
@friendly_errors
def stop(obj: Context) -> None:
    """Stop the running watcher of this store (SIGTERM to the pid in its lock); same as
    `watch --stop`."""
    stop_watcher_and_say(obj)


def stop_watcher_and_say(obj: Context) -> None:
    from app.adapters.watchfiles import stop_watcher

    pid = stop_watcher(obj.workers_dir)
    click.echo(f"stopped the watcher (pid {pid})")


@click.command()
@click.option("-n", "lines", type=click.IntRange(min=0, max=MAX_ROWS), default=30,
              show_default=True,
              help="How many of the last lines to show.")
@click.option("-f", "--follow", is_flag=True, help="Keep printing new lines (Ctrl-C to stop).")
@click.pass_obj
@friendly_errors
def logs(obj: Context, lines: int, follow: bool) -> None:
    """The watcher's log (watch.log in the store, rotated at 1 MB, 3 kept)."""
    from app.adapters.watchfiles import LogPosition, follow_log, read_log_at

    start: LogPosition | None = None
    try:
        shown, start = read_log_at(obj.workers_dir, lines)
        for line in shown:
            click.echo(line)
    except ConductorError:
        if not follow:
            raise
    if follow:
        from app.observe.views import mark_own_pane

        unmark = mark_own_pane("logs -f")  # the watcher leaves this pane alone
        try:
            for line in follow_log(obj.workers_dir, start=start):
                click.echo(line)
        except KeyboardInterrupt:
            pass
        finally:
            unmark()


@click.group()
def service() -> None:
    """Run the watcher as a systemd user service (Linux) or launchd agent (macOS)."""


_kind_option = click.option(
    "--kind", type=click.Choice(["systemd", "launchd"]), default=None,
    help="Service manager (default: launchd on macOS, else systemd).")


@service.command("install")
@_kind_option
@click.option("--no-start", is_flag=True, help="Only write the unit; do not start it.")
@click.option("--print", "show_only", is_flag=True, help="Only print the unit; write nothing.")
@click.pass_obj
@friendly_errors
def service_install(obj: Context, kind: str | None, no_start: bool, show_only: bool) -> None:
    """Write and start a service running `conductor pty watch` for this store and tmux socket;
    it restarts the watcher when it fails."""
    from app.adapters import watchfiles
    from app.install import service as svc

    unit = svc.build(kind or svc.default_kind(), conductor_program(), obj.workers_dir,
                     obj.socket_name, os.environ)
    if show_only:
        click.echo(f"# {unit.path}")
        click.echo(unit.text, nl=False)
        return
    pid = watchfiles.running_pid(obj.workers_dir)
    if pid is not None and not no_start:
        click.echo(f"note: a watcher (pid {pid}) already runs for this store; the service's "
                   "retries give up until it stops: `conductor pty stop`, then "
                   "`conductor pty service install` again", err=True)
    for line in svc.install(unit, start=not no_start):
        click.echo(line)


@service.command("uninstall")
@_kind_option
@click.pass_obj
@friendly_errors
def service_uninstall(obj: Context, kind: str | None) -> None:
    """Stop and remove the service."""
    from app.install import service as svc

    kind = kind or svc.default_kind()
    for line in svc.uninstall(kind, svc.service_path(kind, os.environ)):
        click.echo(line)


@service.command("status")
@_kind_option
@click.pass_obj
@friendly_errors
def service_status(obj: Context, kind: str | None) -> None:
    """Whether the service is installed and running, and the watcher's pid."""
    from app.install import service as svc

    kind = kind or svc.default_kind()
    for line in svc.status_lines(kind, svc.service_path(kind, os.environ), obj.workers_dir):
        click.echo(line)
