"""``conductor pty hosts``: the configured machines, whether ssh reaches them now and how fast.

Registered on the ``pty`` group by ``app.front.cli.main``.
"""

from __future__ import annotations

from dataclasses import asdict

import click

from app.base import render
from app.base.errors import ConductorError
from app.front.cli.context import Context, echo_clean, friendly_errors, read_config
from app.front.cli.output import emit_line


@click.command("hosts")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per host.")
@click.pass_obj
@friendly_errors
def hosts(obj: Context, as_json: bool) -> None:
    """List the [hosts.NAME] of the config file with reachability, latency and their tmux."""
    from app.adapters.tmux import LOCAL_HOST, tmux_version
    from app.run.hosts import HostReport, probe_all

    config = read_config()
    local_tmux = obj.tmux()
    version = local_tmux.version_text().strip()
    parsed = tmux_version(version)
    try:
        local_panes: int | None = len(local_tmux.list_panes().panes)
    except ConductorError:
        local_panes = None
    reports = [HostReport(LOCAL_HOST, "-", True, True, 0.0, version,
                          parsed is None or parsed >= (3, 2), local_panes)]
    enabled = tuple(h for h in config.hosts if h.enabled)
    reports += probe_all(enabled)
    reports += [HostReport(h.name, h.ssh, False, False, problem="disabled")
                for h in config.hosts if not h.enabled]
    if as_json:
        for report in reports:
            emit_line(asdict(report))
        return
    watched = _watched_hosts(obj)
    rows = [("HOST", "SSH", "REACHABLE", "LATENCY", "TMUX", "WATCH", "PANES")]
    for r in reports:
        latency = "-" if r.latency_s is None or r.name == LOCAL_HOST else \
            f"{r.latency_s * 1000:.0f} ms"
        reachable = "yes" if r.reachable else ("disabled" if not r.enabled else "no")
        watch = ("events" if r.events else "polling") if r.reachable else "-"
        if r.enabled and r.name != LOCAL_HOST and r.name not in watched:
            # Reachable by this command is not watched: the watcher has not reached it (not
            # running, started before the host was added, or still connecting).
            watch = "not watched yet"
        rows.append((r.name, r.destination, reachable, latency, r.tmux or "-", watch,
                     "-" if r.panes is None else str(r.panes)))
    echo_clean(render.columns(rows))
    for r in reports:
        if r.problem and r.enabled:
            echo_clean(f"{r.name}: {r.problem}")


def _watched_hosts(obj: Context) -> set[str]:
    """The hosts a running watcher has reached since it started (the store's ``hosts`` table:
    watched, not removed, and checked by its host's thread)."""
    from app.adapters.status import snapshot
    from app.adapters.store_read import StoreReader
    from app.run.hosts import NOT_REACHED_YET

    try:
        if snapshot(obj.workers_dir).watcher_pid is None:
            return set()
        reader = StoreReader(obj.workers_dir)
    except ConductorError:
        return set()
    try:
        rows = reader.hosts()
    finally:
        reader.close()
    return {name for name, row in rows.items() if row.get("watched") and not row.get("removed_ts")
            and row.get("problem") != NOT_REACHED_YET}


def install_remote_hooks(host_name: str, cli: str, path: str | None, show_only: bool) -> None:
    """``hooks install --cli C --host NAME``: app.install.remote_hooks over that host's ssh."""
    from app.install import remote_hooks
    from app.run.hosts import find_host

    host = find_host(read_config().hosts, host_name)
    result = remote_hooks.install(host.via(), cli, path, dry_run=show_only)
    if show_only:
        click.echo(result.snippet)
        return
    if not result.changed:
        echo_clean(f"conductor pty hooks for {cli} already in {host.name}:{result.path}")
        return
    backup = f" (backup: {result.backup})" if result.backup else ""
    echo_clean(f"installed conductor pty hooks for {cli} in {host.name}:{result.path}{backup}")
