"""The config file: one TOML document holding every setting, upgraded in place when keys are new.

:data:`DEFAULT_DOCUMENT` is the whole file as first written, a comment above every key, made
from the one table of settings (:mod:`app.base.settings_table`), which also gives each number its
rule. It is also the schema: a key's type is the type of its default, and a key it lacks is
unknown.

Loading a file written by an older version adds each key it lacks, with its default and its
comment, into the right table, and leaves every line the user wrote as it was (tomlkit keeps
comments and layout). Nothing is written when nothing was added, and a file that does not
validate is never written at all. There is no version field: the keys present are the version.

The OpenRouter API key is never read from, nor written to, this file: it lives in the
environment (or ``.env``), where it does not end up in a dotfiles repository.

Environment variables that name a setting win over the file. For the LLM that happens in
:meth:`app.adapters.llm.LLMSettings.from_env`, which takes :attr:`Config.llm_defaults`.
"""

from __future__ import annotations

import fnmatch
import ipaddress
import logging
import math
import os
import re
import stat
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import tomlkit
from tomlkit.container import OutOfOrderTableProxy
from tomlkit.exceptions import ParseError, TOMLKitError
from tomlkit.items import Comment, InlineTable, Item, Table, Whitespace

from app.act import worktree
from app.act.cycle import jobs as cycle_jobs
from app.act.herd import eligibility
from app.adapters import llm
from app.adapters.notify_settings import COMMAND, KINDS, NotifySettings, parse_states
from app.adapters.ssh import HostConfig
from app.base import inputs, settings, settings_table
from app.base.errors import ConductorError, ConfigError
from app.base.files import write_atomic
from app.base.prices import Budget, Price, PriceError, parse_prices
from app.base.settings import (  # where the file lives is a plain setting
    config_path,
)
from app.run.hosts import parse_hosts

if sys.version_info >= (3, 11):
    import tomllib

logger = logging.getLogger(__name__)

# Keys that must never be in the file, whatever table they are in.
_SECRET_KEYS = frozenset({"api_key", "openrouter_api_key"})


def _toml_value(value: object) -> object:
    """A default of the table as TOML reads it back: a tuple is a list."""
    return list(value) if isinstance(value, tuple) else value


def _v(value: object) -> str:
    """``value`` as TOML, so the defaults are written by the same code that reads them."""
    return tomlkit.item(_toml_value(value)).as_string()


_HEADER = """\
# conductor pty configuration.
#
# Every setting is here with its default. When a newer conductor pty knows a setting this file
# lacks, it adds it (with its default and comment) and leaves the rest as you wrote it.
# Environment variables named in the comments win over this file.
#
# The OpenRouter API key is never read from this file: put OPENROUTER_API_KEY in the
# environment or in a .env file.

"""

# [hosts.NAME] tables are the person's own names, so the template shows one as an example only.
_HOSTS_EXAMPLE = """\
# Other machines whose tmux panes are watched over ssh, one table each (nothing is installed
# there; see design/hosts.md):
# [hosts.gpu]
# ssh = "me@gpu-box"       # anything ssh accepts, an ~/.ssh/config alias included
# ssh_options = []         # extra ssh arguments, e.g. ["-F", "/path/to/ssh_config"]
# socket = ""              # the remote tmux -L socket name; "" = its default server
# enabled = true
# max_panes = 500          # panes of this host watched at most (the first ones listed)
"""


def _template() -> str:
    """The whole file as first written: each table of the settings table, a comment above every
    key, then the hosts example."""
    parts = [_HEADER]
    for name in settings_table.tables():
        parts.append(f"[{name}]\n")
        for entry in settings_table.TABLE:
            table, _, key = entry.key.rpartition(".")
            if table == name:
                comment = "".join(f"# {line}\n" for line in entry.comment.splitlines())
                parts.append(f"{comment}{key} = {_v(entry.default)}\n\n")
    return "".join(parts) + _HOSTS_EXAMPLE


DEFAULT_DOCUMENT = _template()


@dataclass(frozen=True)
class McpSettings:
    """The ``[mcp]`` table: which panes besides its own an agent's MCP server may type into."""

    send_to: tuple[str, ...] = ()  # names or ids, exact or fnmatch globs

    def may_send(self, *names: str) -> bool:
        """True if any of the pane's ids or names matches an entry of ``send_to``."""
        return any(name and fnmatch.fnmatchcase(name, entry)
                   for entry in self.send_to for name in names)


@dataclass(frozen=True)
class ServeSettings:
    """The ``[serve]`` table: where ``conductor pty serve`` listens when it is run (the watcher
    never does), and how long its answer links live."""

    address: str = settings_table.default("serve.address", str)
    port: int = settings_table.default("serve.port", int)
    link_ttl_s: float = settings_table.default("serve.link_ttl", float)
    bad_per_minute: int = settings_table.default("serve.bad_requests_per_minute", int)


def check_address(address: str) -> str:
    """``address`` as an IP address to listen on; :class:`ConfigError` when it is none (a host
    name would be looked up, and could name another machine tomorrow)."""
    try:
        return str(ipaddress.ip_address(address.strip()))
    except ValueError:
        raise ConfigError(f"{address!r} is not an IP address (say 127.0.0.1, or this "
                          "machine's Tailscale address)") from None


@dataclass(frozen=True)
class Config:
    """Everything the file decides. ``added`` lists the dotted keys this load wrote into the
    file, for one log line; it is empty when nothing was missing or the file could not be
    written (that is logged here)."""

    watch: settings.WatchSettings
    notify: NotifySettings
    llm_defaults: llm.LLMSettings  # no key: give it to LLMSettings.from_env(env, defaults=...)
    wait_poll_s: float
    path: Path
    # [create]: tmux remain-on-exit on windows `create` makes
    remain_on_exit: bool = settings_table.default("create.remain_on_exit", bool)
    worktrees: str = worktree.DEFAULT_WORKTREES  # [create]: where `create --worktree` puts them
    herd: eligibility.HerdSettings = field(default_factory=eligibility.HerdSettings)
    cycle: cycle_jobs.CycleSettings = field(default_factory=cycle_jobs.CycleSettings)
    added: tuple[str, ...] = ()
    created: bool = False
    mcp: McpSettings = field(default_factory=McpSettings)
    hosts: tuple[HostConfig, ...] = ()  # [hosts.NAME]: other machines, watched over ssh
    serve: ServeSettings = field(default_factory=ServeSettings)
    budget: Budget = field(default_factory=Budget)  # [budget] and [prices."MODEL"]


def load_config(
    path: Path | None = None, *, env: Mapping[str, str] | None = None, upgrade: bool = True
) -> Config:
    """Read the config file, adding what it lacks when ``upgrade`` is true.

    A missing file is created from :data:`DEFAULT_DOCUMENT` (with ``upgrade``) or stands for the
    defaults (without). Every problem with the file's content or readability raises
    :class:`ConfigError` with one line naming the file; failing to write the upgrade only logs a
    warning, because a read-only config must not stop the watcher.
    """
    path = config_path(env) if path is None else path
    defaults = {entry.key: _toml_value(entry.default) for entry in settings_table.TABLE}
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        created = upgrade and _create(path)
        return _settings(defaults, path, (), created)
    except (OSError, UnicodeDecodeError) as e:
        reason = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        raise ConfigError(f"{path}: cannot read the config file: {reason}") from None

    doc = None if not upgrade else _parse(text, path)
    user = _read_only(text, path) if doc is None else doc.unwrap()
    # [hosts.NAME] tables are the person's own names, not keys of the schema.
    hosts = parse_hosts(user.pop("hosts", {}), path)
    # [prices."MODEL"] tables too: a model's name is the vendor's, not a key of the schema.
    try:
        prices = parse_prices(user.pop("prices", {}), str(path))
    except PriceError as e:
        raise ConfigError(str(e)) from None
    values = _check(_flatten(user), defaults, path)
    added: tuple[str, ...] = ()
    if doc is not None and any(name not in values for name in defaults):
        added = _upgrade(path, text, doc, {**defaults, **values})
    return _with_prices(replace(_settings({**defaults, **values}, path, added, False),
                                hosts=hosts), prices)


def _read_only(text: str, path: Path) -> dict[str, Any]:
    """The file's values, for a reader that never rewrites it: parsed by the stdlib, ~100 times
    faster than tomlkit, which every CLI command would otherwise pay for at start (`wait` on a
    READY pane should answer at once). A broken file is parsed again by tomlkit for the same
    error message the watcher gives (and Python 3.10, without tomllib, has only tomlkit)."""
    if sys.version_info >= (3, 11):
        try:
            return tomllib.loads(text)
        except tomllib.TOMLDecodeError:
            pass
    return dict(_parse(text, path).unwrap())


# --- upgrading -----------------------------------------------------------------------------------


_POSITION = re.compile(r" at line \d+ col \d+$")


def _parse(text: str, path: Path) -> tomlkit.TOMLDocument:
    try:
        return tomlkit.parse(text)
    except ParseError as e:
        # tomlkit counts columns from 0; editors and people count from 1.
        message = _POSITION.sub("", str(e))
        raise ConfigError(f"{path}:{e.line}:{e.col + 1}: invalid TOML: {message}") from None
    except TOMLKitError as e:
        # Some errors (a key given twice inside a table) come without a position.
        raise ConfigError(f"{path}{_locate(text)}: invalid TOML: {e}") from None


def _locate(text: str) -> str:
    """``:line:column`` of the first TOML error in ``text`` as the stdlib parser sees it."""
    if sys.version_info >= (3, 11):
        import tomllib

        try:
            tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            found = re.search(r"\(at line (\d+), column (\d+)\)$", str(e))
            if found:
                return f":{found[1]}:{found[2]}"
    return ""


def _upgrade(path: Path, old: str, doc: tomlkit.TOMLDocument, merged: dict[str, Any]
             ) -> tuple[str, ...]:
    """Add the missing keys to ``doc`` and write it; returns the dotted keys written."""
    added: list[str] = []
    try:
        _fill(doc, _parse(DEFAULT_DOCUMENT, path), added)
        order = list(merged)
        added.sort(key=order.index)
        new = doc.as_string()
        # The file must read back as exactly what was loaded, with every line the user wrote
        # still there in order: a tomlkit quirk may cost a log line, never the user's config.
        reread = tomlkit.parse(new).unwrap()
        reread.pop("hosts", None)  # [hosts.NAME] are checked apart, and never upgraded
        reread.pop("prices", None)  # so are [prices."MODEL"]
        safe = _flatten(reread) == merged and _keeps_lines(old, new)
    except TOMLKitError:
        safe = False
    keys = _few(added)
    if not safe:
        logger.warning(
            "could not add %s to config file %s without changing lines you wrote (inline "
            "tables or dotted keys?); defaults used for them", keys, path)
        return ()
    # Write where a symlink points, so a config kept in a dotfiles repository stays a link.
    real = path.resolve()
    try:
        mode = stat.S_IMODE(real.stat().st_mode)
        if not mode & 0o222 or not os.access(real, os.W_OK):
            # A file made read-only on purpose is honoured even by root, who could write it.
            raise PermissionError(13, "the file is read-only")
        write_atomic(real, new, mode=mode)
    except OSError as e:
        logger.warning("could not add %s to config file %s (%s); defaults used for them",
                       keys, path, e.strerror or e)
        return ()
    return tuple(added)


def _few(names: list[str]) -> str:
    if len(names) <= 4:
        return ", ".join(names) or "new keys"
    return f"{', '.join(names[:3])} and {len(names) - 3} more keys"


def _body(container: Table | tomlkit.TOMLDocument) -> list[tuple[Any, Item]]:
    return container.value.body if isinstance(container, Table) else container.body


def _entries(container: Table | tomlkit.TOMLDocument) -> Iterator[tuple[str, Item, str]]:
    """(key, item, the comment lines right above it) for each key of a default table."""
    comment = ""
    for key, item in _body(container):
        if key is None:
            if isinstance(item, Comment):
                comment += item.as_string()
            elif isinstance(item, Whitespace):
                comment = ""  # a blank line ends the comment that belongs to the next key
            continue
        yield key.key, item, comment
        comment = ""


def _fill(user: Any, default: Table | tomlkit.TOMLDocument, added: list[str], prefix: str = ""
          ) -> None:
    """Add to ``user`` every key of ``default`` it lacks, naming each in ``added``.

    ``user`` is a table as tomlkit parsed it: a document, ``[table]``, inline table, dotted-key
    table or out-of-order table, already checked to hold tables where ``default`` does. The
    items of ``default`` are moved, so it must be a fresh parse.
    """
    entries = list(_entries(default))
    # Tables the user has first: a new top-level table goes after them, and its blank line
    # depends on how the file ends by then.
    for key, item, _ in entries:
        if key in user and isinstance(item, Table):
            _fill(user[key], item, added, f"{prefix}{key}.")
    for key, item, comment in entries:
        name = f"{prefix}{key}"
        if key in user:
            continue
        if isinstance(item, Table):
            added += [f"{name}.{leaf}" for leaf in _leaves(item)]
        else:
            added.append(name)
        if isinstance(user, InlineTable):
            # An inline table holds no comments and must stay on one line.
            user[key] = item.unwrap()
        elif isinstance(user, OutOfOrderTableProxy):
            user[key] = item  # the proxy puts it into one of the table's fragments
        elif isinstance(item, Table):
            indent = item.trivia.indent
            if isinstance(user, tomlkit.TOMLDocument):
                # One blank line before a new top-level table, as between the others.
                text = user.as_string()
                indent = "" if not text.strip() or text.endswith("\n\n") else "\n"
            user.append(key, item)
            item.trivia.indent = indent  # append adds a newline of its own after a sub-table
        else:
            item.trivia.indent = ("\n" if _has_keys(user) else "") + comment
            # append, not []=: it puts a plain key after the table's last key, before its
            # trailing blank lines and sub-tables, and keeps the comment in the indent.
            user.append(key, item)


def _has_keys(user: Table | tomlkit.TOMLDocument) -> bool:
    return any(k is not None and not isinstance(v, Table) for k, v in _body(user))


def _leaves(table: Table, prefix: str = "") -> Iterator[str]:
    for key, item, _ in _entries(table):
        if isinstance(item, Table):
            yield from _leaves(item, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}"


def _keeps_lines(old: str, new: str) -> bool:
    """True if every line of ``old`` is in ``new``, in the same order."""
    lines = iter(new.splitlines())
    return all(any(line == n for n in lines) for line in old.splitlines())


def _create(path: Path) -> bool:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, DEFAULT_DOCUMENT, mode=0o644)
    except OSError as e:
        logger.warning("could not create config file %s (%s); using the defaults", path,
                       e.strerror or e)
        return False
    return True


# --- checking ------------------------------------------------------------------------------------


_STATE_LISTS = ("notify.states", *(f"notify.{kind}.states" for kind in KINDS))


def _check(user: dict[str, Any], defaults: dict[str, Any], path: Path) -> dict[str, Any]:
    """The user's values (dotted key -> value), each checked against its default's type and its
    rule, numbers made int or float as the default is."""
    values: dict[str, Any] = {}
    for name, value in user.items():
        if name.rsplit(".", 1)[-1].lower() in _SECRET_KEYS:
            raise ConfigError(
                f"{path}: {name} is not read from the config file: API keys belong in the "
                "environment (OPENROUTER_API_KEY, or a .env file)"
            )
        if name not in defaults:
            raise ConfigError(f"{path}: {_unknown(name, value, defaults)}")
        values[name] = _checked(name, value, defaults[name], path)
    for name in _STATE_LISTS:
        try:
            parse_states(values.get(name, ()))
        except ConfigError as e:
            raise ConfigError(f"{path}: {name}: {e}") from None
    url = values.get("llm.base_url", llm.DEFAULT_BASE_URL)
    if not url.startswith(("http://", "https://")):
        raise ConfigError(f"{path}: llm.base_url must start with http:// or https://, got {url!r}")
    if not values.get("llm.model", llm.DEFAULT_MODEL).strip():
        raise ConfigError(f"{path}: llm.model must not be empty")
    if not values.get("herd.rules", eligibility.DEFAULT_RULES).strip():
        raise ConfigError(f"{path}: herd.rules must name a rule set")
    if any(not entry.strip() for entry in values.get("mcp.send_to", ())):
        raise ConfigError(f"{path}: mcp.send_to must list pane names or ids, got an empty one")
    _check_allowed_checks(values.get("cycle.allowed_checks", []), path)
    if "serve.address" in values:
        try:
            check_address(values["serve.address"])
        except ConfigError as e:
            raise ConfigError(f"{path}: serve.address: {e}") from None
    try:
        worktree.check_worktrees_pattern(values.get("create.worktrees", "{repo}"))
    except ConductorError as e:
        raise ConfigError(f"{path}: {e}") from None
    return values


def _check_allowed_checks(commands: list[str], path: Path) -> None:
    for n, command in enumerate(commands):
        try:
            if inputs.check_command(command, f"entry {n + 1}") is None:
                raise ConfigError(f"entry {n + 1} is empty")
        except ConductorError as e:
            raise ConfigError(f"{path}: cycle.allowed_checks: {e}") from None


def _unknown(name: str, value: Any, defaults: dict[str, Any]) -> str:
    """Why ``name`` is not a setting: a table where a value belongs, a value where a table
    belongs, or a name nobody knows."""
    parts = name.split(".")
    for i in range(1, len(parts)):
        above = ".".join(parts[:i])
        if above in defaults:
            return f"{above} must be {_kind(defaults[above])}, not a table"
    if any(d.startswith(f"{name}.") for d in defaults):
        return f"{name} must be a table, got {value!r}"
    return f"unknown key {name}"


def _kind(default: Any) -> str:
    if isinstance(default, bool):
        return "true or false"
    if isinstance(default, int):
        return "a whole number"
    if isinstance(default, float):
        return "a number"
    return "a string" if isinstance(default, str) else "a list of strings"


def _flatten(table: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in table.items():
        if isinstance(value, Mapping):
            out.update(_flatten(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def _checked(name: str, value: Any, default: Any, path: Path) -> Any:
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise ConfigError(f"{path}: {name} must be {_kind(default)}, got {value!r}")
        return value
    if isinstance(default, (int, float)):
        whole = isinstance(default, int)
        rule = settings_table.BY_KEY[name].rule
        number_ok = isinstance(value, int) or (not whole and isinstance(value, float))
        if (
            isinstance(value, bool)
            or not number_ok
            or not math.isfinite(value)
            or not rule.holds(value)
        ):
            raise ConfigError(f"{path}: {name} must be {rule.describe(whole)}, got {value!r}")
        return int(value) if whole else float(value)
    if isinstance(default, str):
        if not isinstance(value, str):
            raise ConfigError(f"{path}: {name} must be {_kind(default)}, got {value!r}")
        return value
    if isinstance(default, list):
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ConfigError(f"{path}: {name} must be {_kind(default)}, got {value!r}")
        return [str(v) for v in value]
    raise AssertionError(f"default of {name} has no checked type")  # pragma: no cover


def _with_prices(config: Config, prices: Mapping[str, Price]) -> Config:
    """The config with its [prices."MODEL"] tables in its budget, which herding and the
    cycle obey."""
    budget = replace(config.budget, prices=dict(prices))
    return replace(config, budget=budget, herd=replace(config.herd, budget=budget),
                   cycle=replace(config.cycle, budget=budget))


def _settings(values: dict[str, Any], path: Path, added: tuple[str, ...], created: bool
              ) -> Config:
    kinds = [kind for kind in KINDS if values[f"notify.{kind}.enabled"]]
    try:
        watch = settings.WatchSettings(
            interval_s=values["watch.interval"],
            stable_polls=values["states.ready_polls"] or None,
            history_rows_per_pane=values["watch.history_rows"],
            history_days=values["watch.history_days"],
            force_capture_s=values["watch.force_capture"],
            events=values["watch.events"],
            min_capture_s=values["watch.min_capture"],
            busy_polls=values["states.busy_polls"],
            confirmation_polls=values["states.confirmation_polls"],
            error_polls=values["states.error_polls"],
            ready_min_s=values["states.ready_min_seconds"],
            waiting_grace_s=values["states.waiting_grace"],
            send_grace_s=values["states.send_grace"],
            exited_shown_s=values["states.exited_shown"],
        )
        notify = NotifySettings(
            kinds=frozenset(kinds),
            states=frozenset(parse_states(values["notify.states"])),
            states_by_kind={
                kind: frozenset(parse_states(values[f"notify.{kind}.states"]))
                for kind in KINDS
                if values[f"notify.{kind}.states"]
            },
            min_interval=values["notify.min_interval"],
            notify_command=tuple(values[f"notify.{COMMAND}.argv"]),
            skip_focused=values["notify.skip_focused"],
            sound_needs_you=values["notify.sound_needs_you"],
            sound_done=values["notify.sound_done"],
            desktop_buttons=values["notify.desktop_buttons"],
            timeout=values["notify.timeout"],
        )
    except ConfigError as e:
        raise ConfigError(f"{path}: {e}") from None
    llm_defaults = llm.LLMSettings(
        model=values["llm.model"].strip(),
        base_url=values["llm.base_url"].strip().rstrip("/"),
        timeout=values["llm.timeout"],
        calls_per_minute=values["llm.calls_per_minute"],
        max_screen_chars=values["llm.max_screen_chars"],
        exclude=tuple(p.strip() for p in values["llm.exclude"] if p.strip()),
    )
    budget = Budget(pane_usd=float(values["budget.pane_usd"]),
                    pane_tokens=values["budget.pane_tokens"],
                    day_usd=float(values["budget.day_usd"]), day_tokens=values["budget.day_tokens"])
    return Config(
        budget=budget,
        watch=watch,
        notify=notify,
        llm_defaults=llm_defaults,
        wait_poll_s=values["wait.poll_interval"],
        path=path,
        remain_on_exit=values["create.remain_on_exit"],
        worktrees=values["create.worktrees"].strip(),
        herd=eligibility.HerdSettings(
            stall_after_s=values["herd.stall_after"],
            stability_s=values["herd.stability"],
            confidence_min=values["herd.confidence_min"],
            cooldown_s=values["herd.cooldown"],
            max_nudges=values["herd.max_nudges"],
            waiting_grace_s=values["states.waiting_grace"],
            rules=values["herd.rules"].strip(),
            budget=budget,
        ),
        cycle=cycle_jobs.CycleSettings(
            wait_s=values["cycle.wait"],
            idle_s=values["cycle.idle"],
            spin_max_s=values["cycle.spin_max"],
            cmd_timeout_s=values["cycle.command_timeout"],
            output_chars=values["cycle.output_chars"],
            transcript_entries=values["cycle.transcript_entries"],
            queue_ttl_s=values["queue.ttl"],
            allowed_checks=tuple(c.strip() for c in values["cycle.allowed_checks"]),
            budget=budget,
        ),
        added=added,
        created=created,
        mcp=McpSettings(send_to=tuple(entry.strip() for entry in values["mcp.send_to"])),
        serve=ServeSettings(
            address=check_address(values["serve.address"]),
            port=values["serve.port"],
            link_ttl_s=values["serve.link_ttl"],
            bad_per_minute=values["serve.bad_requests_per_minute"],
        ),
    )
