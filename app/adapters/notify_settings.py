"""The ``[notify]`` settings: which receivers run, for which states, how often, how loud."""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from app.base.errors import ConfigError
from app.base.model import State
from app.base.settings_table import default

TMUX = "tmux"
DESKTOP = "desktop"
COMMAND = "command"
TERMINAL = "terminal"
KINDS: tuple[str, ...] = (TMUX, DESKTOP, COMMAND, TERMINAL)
# Terminal notifications write to the person's terminal behind tmux's back: asked for, not
# assumed (design/notifications.md).
DEFAULT_KINDS = frozenset(kind for kind in KINDS if default(f"notify.{kind}.enabled", bool))

DEFAULT_STATES: frozenset[State] = frozenset(State(name)
                                             for name in default("notify.states", tuple))
DEFAULT_MIN_INTERVAL = default("notify.min_interval", float)
DEFAULT_TIMEOUT = default("notify.timeout", float)


@dataclass(frozen=True)
class NotifySettings:
    """Every notification default, in one place.

    ``min_interval`` is per pane *and* state: a pane gets at most one READY notification per
    interval, but a NEEDS_CONFIRMATION right after a READY (or an ERROR after either) always goes
    out, because it asks for something the earlier message did not. Repeats of the same state
    inside the interval mean the user is already at the pane (they answered, or sent a prompt)
    or the screen flapped, and neither is worth another ping.

    ``states`` is what every kind notifies about unless ``states_by_kind`` gives that kind its
    own set (say, desktop pop-ups only for questions while tmux shows every READY too).
    """

    kinds: frozenset[str] = DEFAULT_KINDS
    states: frozenset[State] = DEFAULT_STATES
    min_interval: float = DEFAULT_MIN_INTERVAL  # seconds, per pane and state
    notify_command: tuple[str, ...] = ()  # argv; empty = no command receiver
    skip_focused: bool = default("notify.skip_focused", bool)
    # A sound (a terminal's BEL, the desktop's sound) for what needs the person, and for the rest
    # (a turn done, an error, an exit).
    sound_needs_you: bool = default("notify.sound_needs_you", bool)
    sound_done: bool = default("notify.sound_done", bool)
    desktop_buttons: bool = default("notify.desktop_buttons", bool)
    timeout: float = DEFAULT_TIMEOUT  # seconds a receiver may take before it is killed
    queue_size: int = 100  # events waiting per receiver before new ones are dropped
    # hash=False keeps the settings hashable although a mapping is not.
    states_by_kind: Mapping[str, frozenset[State]] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        unknown = (set(self.kinds) | set(self.states_by_kind)) - set(KINDS)
        if unknown:
            raise ConfigError(
                f"unknown notification kind(s): {', '.join(sorted(unknown))} "
                f"(known: {', '.join(KINDS)})"
            )
        if self.min_interval < 0 or self.timeout <= 0 or self.queue_size < 1:
            raise ConfigError(
                "notification min_interval must be >= 0, timeout > 0 and queue_size >= 1"
            )

    @classmethod
    def from_mapping(cls, values: Mapping[str, object]) -> NotifySettings:
        """Build settings from config values, e.g. ``{"kinds": ["tmux"], "min_interval": 30}``.

        Keys absent from ``values`` keep their defaults; an unknown key, kind or state raises
        :class:`ConfigError` naming it.
        """
        known = set(cls.__dataclass_fields__)
        extra = set(values) - known
        if extra:
            raise ConfigError(f"unknown notification setting(s): {', '.join(sorted(extra))}")
        kwargs: dict[str, object] = dict(values)
        if "kinds" in values:
            kwargs["kinds"] = frozenset(_str_list(values["kinds"], "kinds"))
        if "states" in values:
            kwargs["states"] = frozenset(parse_states(_str_list(values["states"], "states")))
        if "notify_command" in values:
            kwargs["notify_command"] = parse_command(values["notify_command"])
        if "states_by_kind" in values:
            by_kind = values["states_by_kind"]
            if not isinstance(by_kind, Mapping):
                raise ConfigError("notification setting states_by_kind must map kinds to states")
            kwargs["states_by_kind"] = {
                str(kind): frozenset(parse_states(_str_list(names, f"states_by_kind.{kind}")))
                for kind, names in by_kind.items()
            }
        for key in ("min_interval", "timeout"):
            if key in values:
                kwargs[key] = _number(values[key], key)
        if "queue_size" in values:
            kwargs["queue_size"] = int(_number(values["queue_size"], "queue_size"))
        for key in ("skip_focused", "sound_needs_you", "sound_done", "desktop_buttons"):
            if key in values and not isinstance(values[key], bool):
                raise ConfigError(f"notification setting {key} must be true or false")
        return cls(**kwargs)  # type: ignore[arg-type]  # each value was checked above

    def states_for(self, kind: str) -> frozenset[State]:
        """The states that ``kind`` notifies about."""
        return self.states_by_kind.get(kind, self.states)

    def sound_for(self, urgent: bool) -> bool:
        """Whether an alert makes a sound: one that needs the person, or one that says done."""
        return self.sound_needs_you if urgent else self.sound_done


def _str_list(value: object, key: str) -> list[str]:
    if isinstance(value, str):
        return [v for v in value.replace(",", " ").split() if v]
    if isinstance(value, Iterable) and all(isinstance(v, str) for v in value):
        return [str(v) for v in value]
    raise ConfigError(f"notification setting {key} must be a list of names")


def _number(value: object, key: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ConfigError(f"notification setting {key} must be a number, not {value!r}")
    try:
        return float(value)
    except ValueError as e:
        raise ConfigError(f"notification setting {key} must be a number, not {value!r}") from e


def parse_states(names: Iterable[str]) -> list[State]:
    """``["ready", "NEEDS_CONFIRMATION"]`` -> states; case-insensitive, ``NEEDS_CONF`` accepted."""
    out = []
    for name in names:
        key = name.strip().upper()
        if key == "NEEDS_CONF":
            key = State.NEEDS_CONFIRMATION.value
        try:
            out.append(State(key))
        except ValueError as e:
            known = ", ".join(s.value for s in State)
            raise ConfigError(f"unknown state {name!r} (known: {known})") from e
    return out


def parse_command(value: object) -> tuple[str, ...]:
    """A user's ``notify_command`` as argv: a list is taken as is, a string is split like a shell
    would split words (quotes respected), but no shell ever runs it."""
    if value is None or value == "":
        return ()
    if isinstance(value, str):
        try:
            return tuple(shlex.split(value))
        except ValueError as e:
            raise ConfigError(f"notify_command {value!r}: {e}") from e
    if isinstance(value, Sequence) and all(isinstance(v, str) for v in value):
        return tuple(str(v) for v in value)
    raise ConfigError("notify_command must be a string or a list of strings")
