"""``conductor pty hook``, ``hooks install|uninstall`` and ``mcp [install]``: wiring agent CLIs
to conductor. Parse, call app.install.hooks, app.install.mcp, app.front.hook or
app.front.mcp_server, print.

Registered on the ``pty`` group by ``app.front.cli.main``. What an install writes into an
agent's settings names this installation and this store by absolute path, because the agent
runs it later with its own PATH and environment.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import click

from app.base import settings
from app.front.cli.context import Context, conductor_program, friendly_errors, read_config

# hookconfig.CLIS, spelled out so that every command's start does not import hookconfig.
_AGENT_CLIS = click.Choice(["claude", "codex", "gemini", "qwen"])
_show_only_option = click.option(
    "--print", "show_only", is_flag=True,
    help="Only show the snippet and the file it belongs in; change nothing.")


@click.command(context_settings={"ignore_unknown_options": True, "allow_extra_args": True,
                                 "help_option_names": []})
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
@click.pass_obj
def hook(obj: Context, args: tuple[str, ...]) -> None:
    """Record an agent CLI's hook event (stdin JSON) for its pane; silent, always exit 0."""
    from app.front.hook import main

    sys.exit(main(list(args), env={**os.environ, settings.ENV_WORKERS_DIR: str(obj.workers_dir)}))


@click.group()
def hooks() -> None:
    """Agent CLI hooks that tell conductor pty when a turn starts, asks or ends."""


@hooks.command("install")
@click.option("--cli", "cli_name", type=_AGENT_CLIS, required=True,
              help="Which agent CLI to configure.")
@click.option("--path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Settings file to change (default: the CLI's user settings).")
@_show_only_option
@click.option("--force", is_flag=True, help="Codex: replace another program's `notify`.")
@click.option("--host", default=None, metavar="NAME",
              help="A [hosts.NAME] of the config file: write the hook there over ssh (one "
                   "shell line per event, setting a tmux pane option; nothing to install).")
@click.pass_obj
@friendly_errors
def hooks_install(obj: Context, cli_name: str, path: Path | None, show_only: bool,
                  force: bool, host: str | None) -> None:
    """Merge our hook into an agent CLI's settings, keeping everything else (with a backup)."""
    from app.install.hooks import install

    if host is not None:
        from app.front.cli.hosts import install_remote_hooks

        install_remote_hooks(host, cli_name, str(path) if path else None, show_only)
        return

    result = install(cli_name, _hook_command(obj), path, dry_run=show_only, force=force)
    for warning in result.warnings:
        click.echo(f"warning: {warning}", err=True)
    _echo_install(result, show_only, f"installed conductor pty hooks for {cli_name}",
                  f"conductor pty hooks for {cli_name} already")


@hooks.command("uninstall")
@click.option("--cli", "cli_name", type=_AGENT_CLIS, required=True,
              help="Which agent CLI to change.")
@click.option("--path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Settings file to change (default: the CLI's user settings).")
@friendly_errors
def hooks_uninstall(cli_name: str, path: Path | None) -> None:
    """Remove our hook from an agent CLI's settings, keeping everything else (with a backup)."""
    from app.install.hooks import uninstall

    result = uninstall(cli_name, path)
    if result.changed:
        click.echo(f"removed conductor pty hooks for {cli_name} from {result.path} "
                   f"(backup: {result.backup})")
    else:
        click.echo(f"no conductor pty hooks for {cli_name} in {result.path}")


def _hook_command(obj: Context) -> list[str]:
    """An absolute command, so the hook works whatever PATH the agent runs with, naming the
    store explicitly, so it reaches the same store as this command whatever the agent's env."""
    return [*conductor_program(), "--workers-dir", str(obj.workers_dir), "pty", "hook"]


@click.group(invoke_without_command=True)
@click.pass_context
@friendly_errors
def mcp(ctx: click.Context) -> None:
    """Serve conductor's tools to an agent over MCP (stdio): report, set_goal, status, wait,
    send. Run by the agent CLI from its pane; `mcp install` configures a CLI to do so."""
    if ctx.invoked_subcommand is not None:
        return
    from app.front.mcp_server import run

    obj: Context = ctx.obj
    run(obj.socket_name, obj.workers_dir)


@mcp.command("install")
@click.option("--cli", "cli_name", type=_AGENT_CLIS, required=True,
              help="Which agent CLI to configure.")
@click.option("--path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Config file to change (default: the CLI's user config).")
@_show_only_option
@click.pass_obj
@friendly_errors
def mcp_install(obj: Context, cli_name: str, path: Path | None, show_only: bool) -> None:
    """Add our MCP server to an agent CLI's config, keeping everything else (with a backup),
    and say what it may do (its own pane; other panes only as [mcp] send_to allows)."""
    from app.install.mcp import SERVER_NAME, install, powers

    cfg = read_config()  # a broken config stops here, before anything is written
    result = install(cli_name, _mcp_command(obj), path, dry_run=show_only)
    _echo_install(result, show_only, f"added MCP server {SERVER_NAME!r} for {cli_name}",
                  f"MCP server {SERVER_NAME!r} for {cli_name} already")
    click.echo("")
    for line in powers(cfg.mcp.send_to, cfg.path, obj.socket_name or "default"):
        click.echo(line)


def _mcp_command(obj: Context) -> list[str]:
    """Absolute, naming the store (and the tmux socket when one was given), like the hook."""
    program = _hook_command(obj)[:-2]  # [..., "--workers-dir", DIR] without "pty", "hook"
    socket = ["-L", obj.socket_name] if obj.socket_name else []
    return [*program, *socket, "pty", "mcp"]


def _echo_install(result: Any, show_only: bool, done: str, present: str) -> None:
    """What ``hooks install`` and ``mcp install`` print: the snippet, or what changed where."""
    if show_only:
        click.echo(f"# {result.path}")
        click.echo(result.snippet)
    elif result.changed:
        backup = f" (backup: {result.backup})" if result.backup else ""
        click.echo(f"{done} in {result.path}{backup}")
    else:
        click.echo(f"{present} in {result.path}")
