"""What every ``conductor pty`` command module shares: the click context object, the one-line
error wrapper, the seconds parameter type, the config file as it is and this installation's own
command line."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import wraps
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from app.base import render
from app.base.errors import ConductorError

if TYPE_CHECKING:
    from app.adapters.tmux import Tmux
    from app.observe.one_pane import Target
    from app.run.configfile import Config

F = TypeVar("F", bound=Callable[..., Any])


class Seconds(click.ParamType):  # type: ignore[type-arg]  # generic only from click 8.3
    """A finite number of seconds within bounds: nan would poll with no pause, inf overflows
    timestamps, 1e309 is inf."""

    name = "seconds"

    def __init__(self, low: float, high: float, low_open: bool = False) -> None:
        self.low, self.high, self.low_open = low, high, low_open

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None
                ) -> float:
        if isinstance(value, float):
            number = value
        else:
            try:
                number = float(value)
            except (TypeError, ValueError):
                self.fail(f"{value!r} is not a number of seconds", param, ctx)
        import math

        too_low = number <= self.low if self.low_open else number < self.low
        if not math.isfinite(number) or too_low or number > self.high:
            low = f"more than {self.low:g}" if self.low_open else f"at least {self.low:g}"
            self.fail(f"{value!r} is not a number of seconds {low} and at most {self.high:g}",
                      param, ctx)
        return number


MAX_ROWS = 1_000_000


@dataclass
class Context:
    socket_name: str | None
    workers_dir: Path

    def tmux(self) -> Tmux:
        from app.adapters.tmux import Tmux

        return Tmux(socket_name=self.socket_name)

    def resolve(self, ident: str) -> tuple[Tmux, Target]:
        """The pane ``ident`` names (``HOST:NAME`` for another host's; see
        :func:`app.run.hosts.resolve_anywhere`) and the tmux server it is on."""
        from app.base.errors import PaneNotFound, TmuxServerNotRunning
        from app.observe.one_pane import resolve

        tmux = self.tmux()
        if ":" not in ident:
            # This machine's pane first, before the config file is even read: a pane that is
            # about to end must be found while it is there.
            try:
                return tmux, resolve(tmux, self.workers_dir, ident)
            except (PaneNotFound, TmuxServerNotRunning):
                if not read_config().hosts:
                    raise
        from app.run.hosts import resolve_anywhere

        return resolve_anywhere(tmux, self.workers_dir, ident, read_config().hosts)


def friendly_errors(func: F) -> F:
    """Turn our exceptions into click's one-line ``Error: …`` and exit status 1."""

    @wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except ConductorError as exc:
            raise click.ClickException(str(exc)) from None

    return wrapper  # type: ignore[return-value]


def usage_error(message: str) -> click.UsageError:
    """A command line that cannot mean anything (options that exclude each other, a missing
    text): exit 2 with the command's --help named, not 1 as for a refusal."""
    return click.UsageError(message, click.get_current_context(silent=True))


def echo_clean(text: str = "", err: bool = False) -> None:
    """``click.echo`` for a line that holds what others wrote (an agent's report or check, a
    pane's name, a screen's summary): every line of it cleaned of terminal escapes, controls
    and bidi overrides (:func:`app.base.render.printable`), so printing it cannot retitle, clear
    or reorder the person's terminal."""
    click.echo(render.printable(text), err=err)


def read_config() -> Config:
    """The config file as it is: commands other than `watch` never create or rewrite it."""
    from app.run.configfile import load_config

    return load_config(upgrade=False)


def conductor_program() -> list[str]:
    """This installation's conductor as an absolute command (services start with a bare PATH)."""
    script = shutil.which("conductor", path=str(Path(sys.executable).parent))
    return [script] if script else [sys.executable, "-m", "app"]
