"""The one table of settings (app/base/settings_table.py) is what the config template writes, what
validation enforces, what the settings objects default to, and what design/config.md lists: a key
missing anywhere, or a default, rule or field that differs, fails here."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

import pytest
import tomlkit

from app.act.cycle.jobs import CycleSettings
from app.act.herd.eligibility import HerdSettings
from app.adapters.llm import LLMSettings
from app.adapters.notify_settings import KINDS, NotifySettings
from app.base import settings
from app.base.errors import ConfigError
from app.base.model import State
from app.base.prices import Budget
from app.base.settings import WatchSettings
from app.base.settings_table import BY_KEY, TABLE, Setting, rule_words
from app.run.configfile import DEFAULT_DOCUMENT, Config, McpSettings, ServeSettings, load_config

PAGE = Path(__file__).resolve().parents[2] / "design" / "config.md"
_ROW = re.compile(r"^\| `(?P<key>[\w.]+)` \| `(?P<default>[^|]*)` \| (?P<rule>[^|]*) \| "
                  r"(?P<meaning>.*) \| `(?P<goes_to>[\w.]*)` \|$")


def _template_lines() -> dict[str, tuple[str, str]]:
    """Dotted key -> (the value as the template writes it, the comment lines right above it)."""
    found: dict[str, tuple[str, str]] = {}
    table = ""
    comment: list[str] = []
    for line in DEFAULT_DOCUMENT.splitlines():
        if line.startswith("[") and line.endswith("]"):
            table, comment = line[1:-1], []
        elif line.startswith("# "):
            comment.append(line[2:])
        elif " = " in line and table:
            key, _, value = line.partition(" = ")
            found[f"{table}.{key}"] = (value, "\n".join(comment))
            comment = []
        else:
            comment = []
    return found


def _flat(table: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in table.items():
        if isinstance(value, dict):
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def _as_toml(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def test_each_key_is_in_the_table_once() -> None:
    keys = [setting.key for setting in TABLE]
    assert len(keys) == len(set(keys)) == len(BY_KEY)
    assert all(setting.comment and setting.goes_to for setting in TABLE)


def test_the_template_writes_every_key_with_the_tables_default_and_comment() -> None:
    written = _flat(tomlkit.parse(DEFAULT_DOCUMENT).unwrap())
    assert written == {setting.key: _as_toml(setting.default) for setting in TABLE}
    lines = _template_lines()
    assert {key: comment for key, (_, comment) in lines.items()} == {
        setting.key: setting.comment for setting in TABLE}


def _page_rows() -> dict[str, list[dict[str, str]]]:
    rows: dict[str, list[dict[str, str]]] = {}
    for line in PAGE.read_text(encoding="utf-8").splitlines():
        match = _ROW.match(line)
        if match:
            rows.setdefault(match["key"], []).append(match.groupdict())
    return rows


def test_the_reference_page_lists_every_key_once_as_the_table_says() -> None:
    rows = _page_rows()
    values = _template_lines()
    problems = [f"{key}: not a key of the settings table" for key in rows if key not in BY_KEY]
    for setting in TABLE:
        found = rows.get(setting.key, [])
        if len(found) != 1:
            problems.append(f"{setting.key}: {len(found)} rows in design/config.md, not 1")
            continue
        row = found[0]
        expected = {"default": values[setting.key][0], "rule": rule_words(setting),
                    "goes_to": setting.goes_to}
        problems += [f"{setting.key}: the page's {cell} is {row[cell]!r}, the table's {want!r}"
                     for cell, want in expected.items() if row[cell] != want]
        if setting.env and f"`{setting.env}`" not in row["meaning"]:
            problems.append(f"{setting.key}: the page does not name {setting.env}")
    assert not problems, "\n".join(problems)


def _object_default(setting: Setting) -> Any:
    """What the settings object the key goes to holds when nobody set it, as the table's
    value would be written."""
    owners: dict[str, Any] = {
        "WatchSettings": WatchSettings(), "NotifySettings": NotifySettings(),
        "LLMSettings": LLMSettings(), "HerdSettings": HerdSettings(),
        "CycleSettings": CycleSettings(), "McpSettings": McpSettings(),
        "ServeSettings": ServeSettings(), "Budget": Budget(),
    }
    owner, _, name = setting.goes_to.partition(".")
    kind = setting.key.split(".")[1] if setting.key.count(".") == 2 else ""
    if setting.goes_to == "Config.wait_poll_s":
        return settings.DEFAULT_WAIT_POLL_S  # a required field: its default is the constant
    if owner == "Config":
        fields = {f.name: f.default for f in dataclasses.fields(Config)}
        return fields[name]
    value = getattr(owners[owner], name)
    if setting.goes_to == "NotifySettings.kinds":
        return kind in value
    if setting.goes_to == "NotifySettings.states_by_kind":
        value = value.get(kind, frozenset())
    if setting.goes_to == "WatchSettings.stable_polls":
        return value or 0  # None in the object: each pack's own
    if isinstance(value, frozenset):
        return tuple(s.value for s in State if s in value)  # state names, in State's order
    return value


@pytest.mark.parametrize("setting", TABLE, ids=lambda s: s.key)
def test_the_settings_objects_default_to_the_table(setting: Setting) -> None:
    assert _object_default(setting) == setting.default
    assert type(_object_default(setting)) is type(setting.default)


def test_a_config_from_no_file_is_the_objects_defaults(tmp_path: Path) -> None:
    cfg = load_config(tmp_path / "none.toml", upgrade=False)
    assert (cfg.watch, cfg.notify, cfg.llm_defaults) == (WatchSettings(), NotifySettings(),
                                                        LLMSettings())
    assert (cfg.herd, cfg.cycle, cfg.mcp) == (HerdSettings(), CycleSettings(), McpSettings())
    assert cfg.serve == ServeSettings()
    assert (cfg.remain_on_exit, cfg.worktrees, cfg.wait_poll_s) == (
        BY_KEY["create.remain_on_exit"].default, BY_KEY["create.worktrees"].default,
        BY_KEY["wait.poll_interval"].default)
    assert set(KINDS) == {s.key.split(".")[1] for s in TABLE if s.key.endswith(".enabled")}


_BOUNDED = [s for s in TABLE if not isinstance(s.default, bool)
            and isinstance(s.default, (int, float)) and s.rule.low is not None]


@pytest.mark.parametrize("setting", _BOUNDED, ids=lambda s: s.key)
def test_validation_keeps_the_tables_range(setting: Setting, tmp_path: Path) -> None:
    table, _, key = setting.key.rpartition(".")
    assert setting.rule.low is not None
    outside = [setting.rule.low - 1, *([setting.rule.low] if setting.rule.above else []),
               *([setting.rule.high + 1] if setting.rule.high is not None else [])]
    for value in outside:
        written = int(value) if isinstance(setting.default, int) else float(value)
        path = tmp_path / "config.toml"
        path.write_text(f"[{table}]\n{key} = {written!r}\n", encoding="utf-8")
        with pytest.raises(ConfigError, match=re.escape(f"{setting.key} must be "
                                                        f"{rule_words(setting)}")):
            load_config(path, upgrade=False)
    edge = setting.rule.high if setting.rule.high is not None else setting.default
    path = tmp_path / "config.toml"
    path.write_text(f"[{table}]\n{key} = {edge!r}\n", encoding="utf-8")
    assert load_config(path, upgrade=False).path == path
