"""``conductor pty …``: parse, call the core, print. Our errors become one line and exit 1.

Here: the root groups and the day-to-day commands. What every command module shares
(``Context``, ``friendly_errors``, ``Seconds``, ``read_config``, ``conductor_program``) is in
``context``; the other groups live by topic in ``agents`` (hooks, MCP), ``service`` (stop, logs,
service), ``cycle`` and ``herd``, registered at the bottom.
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, TypeVar

import click

from app.base import render, settings
from app.base.errors import ConductorError, error_line
from app.front.cli.completion import complete_panes
from app.front.cli.context import (
    MAX_ROWS,
    Context,
    Seconds,
    echo_clean,
    friendly_errors,
    read_config,
    usage_error,
)
from app.front.cli.explain import history_json, history_text
from app.front.cli.output import emit, emit_line, error_document, versioned, wants_json

if TYPE_CHECKING:
    from app.base.prices import PriceTable

F = TypeVar("F", bound=Callable[..., Any])


_socket_option = click.option(
    "-L", "--socket-name", default=None, metavar="NAME",
    help="tmux socket name (as tmux -L); default $CONDUCTOR_TMUX_SOCKET or the default server.",
)


@click.group()
@_socket_option
@click.option("--workers-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help=f"Store folder; default ${settings.ENV_WORKERS_DIR} or "
                   "~/.local/state/conductor-pty/workers.")
@click.version_option(package_name="conductor-pty")
@click.pass_context
def conductor(ctx: click.Context, socket_name: str | None, workers_dir: Path | None) -> None:
    """conductor: orchestration helpers for AI coding agents in tmux."""
    ctx.obj = Context(socket_name or settings.tmux_socket(),
                      workers_dir.absolute() if workers_dir else settings.workers_dir())


@conductor.group()
@_socket_option
@click.version_option(package_name="conductor-pty")
@click.pass_obj
def pty(obj: Context, socket_name: str | None) -> None:
    """Watch tmux panes and tell which agents are READY, BUSY, NEEDS_CONFIRMATION or ERROR."""
    if socket_name:
        obj.socket_name = socket_name


@pty.command()
@click.option("--interval", type=Seconds(0.05, 86400), default=None,
              help=f"Seconds between polls (default {settings.DEFAULT_INTERVAL_S:g}, or the "
                   "config file's).")
@click.option("--stable-polls", type=click.IntRange(min=1, max=1000), default=None,
              help="Polls a screen must stay unchanged before READY (default: per CLI pack).")
@click.option("--once", is_flag=True, help="Run one poll cycle and exit.")
@click.option("--no-notify", is_flag=True, help="No tmux or desktop notifications.")
@click.option("-v", "--verbose", count=True, help="More logging (-vv for debug).")
@click.option("-q", "--quiet", is_flag=True, help="Only warnings and errors.")
@click.option("--stop", is_flag=True, help="Stop the running watcher of this store instead.")
@click.pass_obj
@friendly_errors
def watch(obj: Context, interval: float | None, stable_polls: int | None, once: bool,
          no_notify: bool, verbose: int, quiet: bool, stop: bool) -> None:
    """Poll every pane and keep the status store up to date (runs until stopped).

    Settings come from the config file (created with every default on first start, and given
    any keys a newer version added), then the environment, then these options. The log also
    goes to watch.log in the store (`conductor pty logs`).
    """
    from dataclasses import replace

    from app.run.configfile import load_config
    from app.run.daemon import LOCK_NAME, Daemon, InstanceLock, StoreLost, setup_logging, start_anew

    if stop:
        from app.front.cli.service import stop_watcher_and_say

        stop_watcher_and_say(obj)
        return
    # A store folder that cannot be used is one line, before logging would add its own.
    os.close(InstanceLock(obj.workers_dir / LOCK_NAME).open())
    setup_logging(-1 if quiet else verbose, obj.workers_dir)
    cfg = load_config()
    notes = [f"wrote the default config to {cfg.path}"] if cfg.created else \
        [f"config {cfg.path}: added new settings {', '.join(cfg.added)}"] if cfg.added else []
    settings = replace(cfg.watch, interval_s=interval or cfg.watch.interval_s,
                       stable_polls=stable_polls or cfg.watch.stable_polls)
    notify = replace(cfg.notify, kinds=frozenset()) if no_notify else cfg.notify
    try:
        code = Daemon(obj.tmux(), obj.workers_dir, settings, once=once, notify=notify,
                      llm_defaults=cfg.llm_defaults, notes=tuple(notes), herd=cfg.herd,
                      cycle=cfg.cycle, hosts=cfg.hosts, link_ttl_s=cfg.serve.link_ttl_s,
                      config_path=cfg.path).run()
    except StoreLost as lost:
        start_anew(lost, obj.workers_dir)
    sys.exit(code)


@pty.command()
@click.argument("directory", type=click.Path(path_type=Path))
@click.option("--name", default=None, help="Window name (default worker-<short id>).")
@click.option("--cli", "cli_name", default=None, help="Force the classifier pack, e.g. claude.")
@click.option("--cmd", "command", default=None, help="Command to run in the new window.")
@click.option("--worktree", "branch", default=None, metavar="BRANCH",
              help="Root the window in a new git worktree of DIRECTORY's repository on BRANCH "
                   "(new or existing), placed by the config's create.worktrees.")
@click.option("--json", "as_json", is_flag=True, help="The new pane as a JSON object.")
@click.pass_obj
@friendly_errors
def create(obj: Context, directory: Path, name: str | None, cli_name: str | None,
           command: str | None, branch: str | None, as_json: bool) -> None:
    """Open a new tmux window rooted in DIRECTORY and register it; prints its id (with
    --worktree, the worktree's path and branch too, on stderr)."""
    from app.act.create import create_worker

    cfg = read_config()
    created = create_worker(obj.tmux(), obj.workers_dir, directory, name, cli_name, command,
                            remain_on_exit=cfg.remain_on_exit, worktree_branch=branch,
                            worktrees=cfg.worktrees, caller_env=os.environ)
    if as_json:
        emit({"id": created.id, "name": created.name, "pane_id": created.pane_id,
              "session": created.session, "directory": str(directory.absolute()),
              "worktree": created.worktree, "branch": branch})
        return
    click.echo(created.id)
    if created.worktree is not None:
        # On stderr: `id=$(conductor pty create ...)` keeps getting the id alone.
        echo_clean(f"{created.id}: worktree {created.worktree} on branch {branch}", err=True)


@pty.command()
@click.option("--short", is_flag=True, help="One line for tmux status-right.")
@click.option("--json", "as_json", is_flag=True, help="A JSON list of status objects.")
@click.option("--colour", "--color", "--tmux-colours", "colour", is_flag=True,
              help="With --short: tmux colour markup.")
@click.option("--width", type=click.IntRange(min=0, clamp=True), default=None, metavar="N",
              help="At most N columns: with --short whole items, the panes needing you first, "
                   "and +K for the rest; the table instead of the terminal's width.")
@click.option("--watch", "keep_watching", is_flag=True,
              help="Redraw in place every --interval seconds until Ctrl-C.")
@click.option("--interval", type=Seconds(0.2, 86400), default=2.0, show_default=True,
              help="With --watch: seconds between redraws.")
@click.option("--all", "show_all", is_flag=True,
              help="Also panes that exited longer ago than states.exited_shown.")
@click.pass_obj
@friendly_errors
def status(obj: Context, short: bool, as_json: bool, colour: bool, width: int | None,
           keep_watching: bool, interval: float, show_all: bool) -> None:
    """Every watched pane, the ones needing a human first, with how long each has waited.

    With -L (or $CONDUCTOR_TMUX_SOCKET), only that tmux server's panes; without, every
    server's panes in the store."""
    from app.adapters import status as status_module

    if short and (as_json or keep_watching):
        raise click.UsageError("--short is one line for tmux; it cannot be combined with "
                               "--json or --watch")
    if as_json and (keep_watching or width is not None):
        raise click.UsageError("--json cannot be combined with --watch or --width")
    if short:
        click.echo(status_module.short_line(obj.workers_dir, colour, width, obj.socket_name))
        return
    config = read_config()
    settings = config.watch
    grace = settings.waiting_grace_s
    keep_s = float("inf") if show_all else settings.exited_shown_s

    def snapshot(workers_dir: Path) -> status_module.Snapshot:
        snap = status_module.snapshot(workers_dir, obj.socket_name)
        snap.workers = status_module.shown(snap.workers, time.time(), keep_s)
        _add_usage(workers_dir, snap.workers, config.budget.table())
        return snap

    def columns() -> int | None:
        return width if width is not None else _terminal_width()

    if not keep_watching:
        snap = snapshot(obj.workers_dir)
        for line in status_module.watcher_warnings(snap, time.time()):
            click.echo(line, err=True)
        if as_json:
            now = time.time()
            _add_sessions(obj.workers_dir, snap.workers)
            click.echo(render.as_json([versioned(w) for w in snap.workers], now, grace,
                                      snap.stale_for(now)))
        else:
            click.echo(render.table(snap.workers, time.time(), grace, columns())
                       if snap.workers else "no panes watched yet")
        return
    from app.observe.views import mark_own_pane

    unmark = mark_own_pane("status --watch")  # the watcher leaves this pane alone
    try:
        with interrupt_flag() as interrupted:
            while not interrupted.is_set():
                now = time.time()
                snap = snapshot(obj.workers_dir)
                body = render.table(snap.workers, now, grace, columns()) if snap.workers \
                    else "no panes watched yet"
                header = [time.strftime("%H:%M:%S", time.localtime(now)) + "  conductor pty status"
                          f"  (every {interval:g}s, Ctrl-C to stop)",
                          *status_module.watcher_warnings(snap, now), ""]
                # Home, draw, clear the rest: redrawn in place without a blank flash. Cut to the
                # terminal's height and no newline after the last row, so a small pane or popup
                # never scrolls (which would push the header out of sight).
                rows = max(1, shutil.get_terminal_size().lines)
                lines = [render.fit(render.printable(line), columns()) for line in header]
                lines = (lines + render.printable(body).split("\n"))[:rows]
                sys.stdout.write("\x1b[H" + "\x1b[K\n".join(lines) + "\x1b[K\x1b[J")
                sys.stdout.flush()
                time.sleep(interval)
    except KeyboardInterrupt:
        click.echo("")
    finally:
        unmark()


@contextmanager
def interrupt_flag() -> Iterator[threading.Event]:
    """Ctrl-C as a flag as well as KeyboardInterrupt, for a loop that redraws until stopped:
    Python drops an exception raised while a finalizer runs (an SQLite object of the last
    redraw being collected), and a KeyboardInterrupt lost there would leave the loop going."""
    interrupted = threading.Event()

    def on_interrupt(signum: int, frame: FrameType | None) -> None:
        interrupted.set()
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, on_interrupt)
    try:
        yield interrupted
    finally:
        signal.signal(signal.SIGINT, previous)


def _terminal_width() -> int | None:
    """The terminal's width when printing to one; None (no cut) into a pipe or a file."""
    if not sys.stdout.isatty():
        return None
    return shutil.get_terminal_size().columns


@pty.command()
@click.argument("ident", metavar="ID", shell_complete=complete_panes)
@click.option("-n", "lines", type=click.IntRange(min=1, max=MAX_ROWS), default=20,
              show_default=True,
              help="How many transitions to show.")
@click.option("-f", "--follow", is_flag=True, help="Keep printing new transitions.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per transition and line.")
@click.pass_obj
@friendly_errors
def tail(obj: Context, ident: str, lines: int, follow: bool, as_json: bool) -> None:
    """The state history of a pane, newest last."""
    from app.adapters.status import find_worker
    from app.adapters.store_read import StoreReader
    from app.observe.views import mark_own_pane

    reader = StoreReader(obj.workers_dir)
    unmark = mark_own_pane("tail -f", follow)
    try:
        worker = find_worker(reader.workers(obj.socket_name), ident)
        last_seq = 0

        def show(row: Any) -> None:
            if as_json:
                emit_line({"id": worker["id"], "name": worker["name"], **history_json(row)})
            else:
                echo_clean(history_text(row))

        for row in reader.history(worker["id"], limit=lines):
            show(row)
            last_seq = row.seq
        with interrupt_flag() as interrupted:
            while follow and not interrupted.is_set():
                time.sleep(1.0)
                for row in reader.history(worker["id"], after_seq=last_seq):
                    show(row)
                    last_seq = row.seq
    except KeyboardInterrupt:
        pass
    finally:
        unmark()
        reader.close()


@pty.command()
@click.argument("ident", metavar="ID|NAME", required=False, shell_complete=complete_panes)
@click.option("--next", "go_next", is_flag=True,
              help="The next pane that needs you: NEEDS_CONFIRMATION, then ERROR, then the "
                   "longest-waiting READY agent, then READY shells; each in turn, every "
                   "waiting pane once before any again.")
@click.option("--from", "current_pane", default=None, metavar="%PANE",
              help="With --next: the pane you are on, taken last (the tmux key binding).")
@click.pass_obj
@friendly_errors
def switch(obj: Context, ident: str | None, go_next: bool, current_pane: str | None) -> None:
    """Bring a pane to the front (switch-client, or select-window with no client attached)."""
    from app.adapters.status import (
        load_round,
        next_needing_human,
        round_after,
        save_round,
        snapshot,
    )
    from app.run.hosts import pick_worker, switch_to_remote

    hosts = read_config().hosts
    if go_next == bool(ident):
        raise usage_error("give a pane ID|NAME or --next, not both")
    tmux = obj.tmux()
    # Only the panes of the server it switches on, even without -L (the default server's).
    workers = [w for w in snapshot(obj.workers_dir, tmux.label).workers
               if w.get("state") != "EXITED"]
    if go_next:
        visited = load_round(obj.workers_dir, tmux.label)
        found = next_needing_human(workers, current_pane, visited)
        if found is None:
            message = "no pane needs you: none is NEEDS_CONFIRMATION, ERROR or READY"
            if current_pane:
                # From the tmux key binding, where stdout goes nowhere: say it on the status line.
                tmux.display_message(f"conductor: {message}")
            click.echo(message)
            return
        worker = found
        save_round(obj.workers_dir, tmux.label, round_after(visited, workers, found, current_pane))
    else:
        worker = pick_worker(workers, str(ident), hosts)
    if (worker.get("host") or "local") != "local":
        echo_clean(f"{worker['name']}@{worker['host']} ({worker['id']}): "
                   f"{switch_to_remote(tmux, hosts, worker)}")
        return
    done = tmux.switch_to(worker["pane_id"])
    echo_clean(f"{worker['name']} ({worker['id']}): {done}")


@pty.command()
@click.argument("ident", metavar="ID|NAME|%PANE", shell_complete=complete_panes)
@click.argument("words", nargs=-1, metavar="TEXT...")
@click.option("--no-enter", is_flag=True, help="Type the text but do not press Enter.")
@click.option("--force", is_flag=True,
              help="Send even if the pane asks for confirmation or holds unsent input.")
@click.option("--queue", "queued", is_flag=True,
              help="Return at once; the watcher types TEXT when the pane is next READY.")
@click.option("--json", "as_json", is_flag=True, help="What was done as a JSON object.")
@click.pass_obj
@friendly_errors
def send(obj: Context, ident: str, words: tuple[str, ...], no_enter: bool, force: bool,
         queued: bool, as_json: bool) -> None:
    """Type TEXT into a pane literally, then Enter; TEXT from stdin when not given.

    Refuses (exit 1) when the pane is waiting for confirmation or has half-typed input in its
    prompt, unless --force; a dead pane and a dialog's menu (use `answer`) even with --force.
    Put `--` before text that starts with a dash. With --queue the watcher delivers it, oldest
    first and one per turn, through the same refusals.
    """
    from app.front import commands

    if not words and sys.stdin.isatty():
        raise usage_error("no text to send: give TEXT, or pipe it on stdin")
    text = " ".join(words) if words else _stdin_text()
    if not words and text.endswith("\n"):
        text = text[:-1]  # `echo task | conductor pty send w` means one line, not two Enters
    if queued:
        if no_enter or force:
            raise usage_error("--queue cannot be combined with --no-enter or --force")
        from app.front.cli.cycle import queue_send

        queue_send(obj, ident, text, as_json)
        return
    tmux, target = obj.resolve(ident)
    commands.send(tmux, obj.workers_dir, target, text, read_config(), enter=not no_enter,
                  force=force)
    if as_json:
        emit({**_target_json(target), "sent": True, "queued": False, "job": None,
              "enter": not no_enter})


def _target_json(target: Any) -> dict[str, Any]:
    """The pane a command acted on, as every acting command's JSON names it."""
    return {"id": target.worker_id, "name": target.name, "pane_id": target.pane.pane_id}


@pty.command()
@click.argument("ident", metavar="ID|NAME|%PANE", shell_complete=complete_panes)
@click.argument("choice", metavar="approve|refuse|OPTION")
@click.option("--about", metavar="TEXT", default=None,
              help="Press only if the dialog shows TEXT (the command or file you decided on).")
@click.option("--json", "as_json", is_flag=True, help="What was pressed as a JSON object.")
@click.pass_obj
@friendly_errors
def answer(obj: Context, ident: str, choice: str, about: str | None, as_json: bool) -> None:
    """Answer the dialog a pane shows by pressing its own keys (never typed text).

    The options are read from the screen now (`classify --json` shows them): approve takes
    the first option that approves this request only ("Yes", "Allow once"; a grant for always,
    this session or don't ask again only by its key or label), refuse the first that refuses
    (or Esc where the dialog says Esc cancels); OPTION is an option's key (2, y) or label. The
    dialog is read again before each key. Exits 1 with nothing pressed when the pane asks
    nothing, its options cannot be read, the dialog changed, or the program on screen is not
    reading its input, or it is not --about TEXT; exits 1 too when the dialog is still up after
    the keys. Says what the dialog asked about.
    """
    from app.base.redact import redact
    from app.front import commands

    tmux, target = obj.resolve(ident)
    done = commands.answer(tmux, obj.workers_dir, target, choice, read_config(), about=about)
    if as_json:
        emit({**_target_json(target), "answered": done.label, "keys": list(done.keys),
              "subject": redact(done.subject)})
        return
    subject = f" to: {render.clean_text(redact(done.subject))}" if done.subject else ""
    click.echo(f"{target.label}: answered {render.clean_text(done.label)!r} "
               f"({' '.join(done.keys)}){subject}")


@pty.command()
@click.argument("ident", metavar="ID|NAME|%PANE", shell_complete=complete_panes)
@click.option("--until", "until_text", default="READY", show_default=True,
              help="State to wait for; several separated by commas, e.g. READY,NEEDS_CONF; "
                   "EXITED waits for the pane to end.")
@click.option("--timeout", type=Seconds(0, 10**9), default=None,
              help="Give up after this many seconds (exit 124). Default: wait for ever.")
@click.option("--poll", type=Seconds(0.05, 3600), default=None,
              help=f"Seconds between looks at the pane (default "
                   f"{settings.DEFAULT_WAIT_POLL_S:g}, config [wait]).")
@click.option("-v", "--verbose", is_flag=True, help="Say on stderr why it keeps waiting.")
@click.option("-q", "--quiet", is_flag=True, help="Print nothing on success.")
@click.option("--json", "as_json", is_flag=True,
              help="The outcome as a JSON object on stdout, on timeout too (still exit 124).")
@click.pass_obj
@friendly_errors
def wait(obj: Context, ident: str, until_text: str, timeout: float | None, poll: float | None,
         verbose: bool, quiet: bool, as_json: bool) -> None:
    """Block until a pane is READY (or --until STATE); exit 0, or 124 on timeout.

    Looks at the pane itself every --poll seconds with the watcher's rules and the agent's hook
    events, so it works with or without `conductor pty watch`. After a `send` it does not take
    READY until the pane has visibly started the new turn (or a short grace passed).
    """
    from app.act import handoff
    from app.front import commands

    try:
        until = commands.wait_states(until_text, "--until")
    except ConductorError as exc:
        raise usage_error(str(exc)) from None
    tmux, target = obj.resolve(ident)

    def report(assessment: Any) -> None:
        if verbose:
            why = ", ".join(assessment.reasons) or "-"
            note = f": {render.clean_text(assessment.summary)}" if assessment.summary else ""
            click.echo(f"{target.label}: {assessment.state.value} [{why}]{note}"
                       f"{'' if assessment.state in until else '; still waiting'}", err=True)

    watch, result = commands.wait(tmux, obj.workers_dir, target, until, timeout, read_config(),
                                  poll_s=poll, on_change=report)
    a = result.assessment
    if as_json:
        emit({**_target_json(target), "reached": result.reached, "state": a.state.value,
              "summary": a.summary, "reasons": list(a.reasons),
              "waited_s": round(result.waited_s, 1),
              "in_state_s": round(watch.seconds_in_state(a, result.state_seen_s), 1)})
        if not result.reached:
            sys.exit(handoff.TIMEOUT_EXIT)
        return
    if not result.reached:
        lasted = watch.seconds_in_state(a, result.state_seen_s)
        click.echo(f"timed out after {render.duration(result.waited_s)}: {target.label} is "
                   f"{a.state.value} for {render.duration(lasted)}"
                   f"{': ' + render.clean_text(a.summary) if a.summary else ''}", err=True)
        sys.exit(handoff.TIMEOUT_EXIT)
    if not quiet:
        click.echo(f"{target.label}: {a.state.value} after {result.waited_s:.1f}s")


def _add_usage(workers_dir: Path, workers: list[dict[str, Any]], prices: PriceTable) -> None:
    """Each row's ``usage`` (tokens by kind, ``cost_usd``), None for a pane with no record."""
    from app.adapters.store_read import StoreReader
    from app.observe.spend import totals

    if not workers:
        return
    reader = StoreReader(workers_dir)
    try:
        rows = reader.usage()
    finally:
        reader.close()
    by_pane = totals(rows, prices, lambda row: str(row["id"]))
    for worker in workers:
        found = by_pane.get(worker["id"])
        worker["usage"] = found.public() if found is not None else None


def _add_sessions(workers_dir: Path, workers: list[dict[str, Any]]) -> None:
    """Each row's agent session (issue 33), read only for --json: the table has no room."""
    from app.adapters.store_read import StoreReader
    from app.observe.sessions import with_sessions

    if not workers:
        return
    reader = StoreReader(workers_dir)
    try:
        with_sessions(reader, workers)
    finally:
        reader.close()


def _stdin_text() -> str:
    """stdin as UTF-8 text; bytes that are not are refused, never typed as "?"."""
    data = sys.stdin.buffer.read()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConductorError(f"not sent: the text on stdin is not valid UTF-8 (byte "
                             f"0x{data[exc.start]:02x} at offset {exc.start}); nothing was "
                             "typed") from None


def _not_utf8(argv: Sequence[str]) -> str | None:
    """The one line refusing the first argument that is not UTF-8 (Python keeps such bytes as
    lone surrogates), or None. Names, texts and sockets are text: one that is not would be
    typed as "?" or fail deep in the store."""
    for index, arg in enumerate(argv, 1):
        if any("\ud800" <= char <= "\udfff" for char in arg):
            shown = repr(os.fsencode(arg))[:80]
            return f"Error: argument {index} ({shown}) is not valid UTF-8; nothing done"
    return None


def _register_groups() -> None:
    from app.front.cli.agents import hook, hooks, mcp
    from app.front.cli.classify import classify
    from app.front.cli.cost import budget, cost
    from app.front.cli.cycle import dispatch, pause, queue, report, resume
    from app.front.cli.doctor import doctor
    from app.front.cli.explain import explain
    from app.front.cli.herd import goal, herd
    from app.front.cli.hosts import hosts
    from app.front.cli.restore import restore
    from app.front.cli.serve import serve
    from app.front.cli.service import logs, service, stop
    from app.front.cli.worktree import worktree

    for command in (hook, hooks, mcp, report, queue, dispatch, pause, resume, herd, goal,
                    stop, logs, service, worktree, hosts, restore, serve, doctor, classify, cost,
                    budget, explain):
        pty.add_command(command)


_register_groups()


def run(argv: list[str]) -> int:
    """Exit 0 done, 2 the command line was wrong (click's and POSIX's convention), 1 anything
    else; every error one line on stderr, a JSON document there under ``--json``."""
    as_json = wants_json(argv)
    refused = _not_utf8(argv)
    if refused is not None:  # text that cannot be typed, as stdin's: 1, like a refused text
        return _fail(refused.removeprefix("Error: "), 1, as_json)
    settings.load_dotenv_file()
    try:
        result = conductor.main(args=argv, prog_name="conductor", standalone_mode=False)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except click.ClickException as exc:
        message = _group_without_command(exc) or error_line(exc.format_message())
        if isinstance(exc, click.UsageError):
            hint = f" (see `{exc.ctx.command_path} --help`)" if exc.ctx is not None else ""
            return _fail(message + hint, 2, as_json)
        return _fail(message, 1, as_json)
    except click.Abort:
        return _fail("Aborted.", 1, as_json)
    return result if isinstance(result, int) else 0


def _group_without_command(exc: click.ClickException) -> str:
    """A group called without its command: click's message is the group's whole help, which
    makes no readable line; its commands do."""
    no_command = getattr(click.exceptions, "NoArgsIsHelpError", None)  # click >= 8.2
    ctx = getattr(exc, "ctx", None)
    if no_command is None or not isinstance(exc, no_command) or ctx is None or \
            not isinstance(ctx.command, click.Group):
        return ""
    return f"{ctx.command_path} needs a command: {', '.join(ctx.command.list_commands(ctx))}"


def _fail(message: str, code: int, as_json: bool) -> int:
    """One line on stderr (click would print the usage too): JSON under ``--json``."""
    click.echo(error_document(message, code) if as_json else
               message if message == "Aborted." else f"Error: {message}", err=True)
    return code
