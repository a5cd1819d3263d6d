"""``conductor pty mcp install``: add our MCP server to Claude Code, Codex or Gemini CLI.

Same promises as ``hooks install`` (and its file helpers): every other key stays, a second
install changes nothing, the old file is backed up before it changes and replaced in one rename.
Where each CLI keeps user-level MCP servers: Claude Code ``~/.claude.json`` (``mcpServers``; in
``$CLAUDE_CONFIG_DIR`` when set), Codex ``~/.codex/config.toml`` (``[mcp_servers.NAME]``), Gemini
CLI ``~/.gemini/settings.json`` (``mcpServers``). Codex's entry also names, in ``env_vars``, the
variables the server needs from the agent's environment (:data:`CODEX_ENV_VARS`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from app.base.errors import ConfigError
from app.install.hooks import (
    CLIS,
    InstallResult,
    _check_cli,
    _json_type,
    _parse_json,
    followed,
    read_settings,
    write_settings,
)
from app.install.hooks import default_path as hooks_path

SERVER_NAME = "conductor"


def default_path(cli: str, env: Mapping[str, str] | None = None) -> Path:
    """Codex and Gemini CLI keep MCP servers in the file that holds their hooks; Claude Code
    keeps them in ``.claude.json``, not in ``settings.json``."""
    if cli != "claude":
        return hooks_path(cli, env)
    env = os.environ if env is None else env
    base = env.get("CLAUDE_CONFIG_DIR")
    if base:
        return Path(base).expanduser() / ".claude.json"
    return (Path(env["HOME"]) if env.get("HOME") else Path.home()) / ".claude.json"


def install(cli: str, argv: list[str], path: Path | None = None, *, dry_run: bool = False,
            env: Mapping[str, str] | None = None) -> InstallResult:
    """Merge the server entry running ``argv`` into ``cli``'s config; see the module doc."""
    _check_cli(cli)
    if not argv:
        raise ConfigError("the MCP server command is empty")
    target = followed(path if path is not None else default_path(cli, env))
    old = read_settings(target)
    old_text = old.text if old is not None else None
    if cli == "codex":
        new_text, snippet = _merge_codex(target, old_text, argv)
    else:
        new_text, snippet = _merge_json(cli, target, old_text, argv)
    backup = None
    if new_text is not None and not dry_run:
        backup = write_settings(target, new_text, old)
    return InstallResult(cli, target, backup, new_text is not None, snippet)


def powers(send_to: tuple[str, ...], config_path: Path, tmux_label: str) -> list[str]:
    """What the server may do, in the person's words, for ``mcp install`` to print."""
    where = f"send_to of [mcp] in {config_path}"
    others = (f"{', '.join(json.dumps(name) for name in send_to)} ({where})" if send_to
              else f"none; name them in {where}")
    return [
        f"The MCP server acts for the agent in whose pane it runs (tmux server {tmux_label}):",
        "  send      types into that pane, never into a paused pane",
        f"            other panes: {others}",
        "  wait      watches any pane of that server: it only reads, as status does",
        "  report    records the agent's report; a check command runs only where you",
        "            declared that check, never because an agent named it",
        "  set_goal  records what the agent's own pane works towards",
        f"An agent on another tmux server than {tmux_label} gets nothing done through it.",
    ]


# Codex starts an MCP server with a handful of variables only (HOME, PATH, SHELL, TERM, LANG on
# Linux; seen on 0.142.5, 0.152.0 and 0.169.0) plus those its ``env_vars`` names: these tell the
# server whose pane it acts for and which config file the person edits.
CODEX_ENV_VARS = ("TMUX", "TMUX_PANE", "CONDUCTOR_CONFIG", "XDG_CONFIG_HOME")


def _entry(cli: str, argv: list[str]) -> dict[str, Any]:
    entry: dict[str, Any] = {"command": argv[0], "args": argv[1:]}
    if cli == "claude":
        entry = {"type": "stdio", **entry}
    if cli == "codex":
        entry["env_vars"] = list(CODEX_ENV_VARS)
    return entry


def _merge_json(cli: str, path: Path, old_text: str | None, argv: list[str]
                ) -> tuple[str | None, str]:
    entry = _entry(cli, argv)
    snippet = json.dumps({"mcpServers": {SERVER_NAME: entry}}, indent=2)
    settings = _parse_json(cli, path, old_text) if old_text is not None else {}
    servers = settings.setdefault("mcpServers", {})
    if not isinstance(servers, dict):
        raise ConfigError(f'{path}: "mcpServers" is {_json_type(servers)}, not an object')
    if servers.get(SERVER_NAME) == entry:
        return None, snippet
    servers[SERVER_NAME] = entry
    return json.dumps(settings, indent=2, ensure_ascii=False) + "\n", snippet


def _merge_codex(path: Path, old_text: str | None, argv: list[str]) -> tuple[str | None, str]:
    import tomlkit
    from tomlkit.exceptions import ParseError

    entry = _entry("codex", argv)
    snippet = tomlkit.dumps({"mcp_servers": {SERVER_NAME: entry}}).strip()
    try:
        document = tomlkit.parse(old_text or "")
    except ParseError as error:
        raise ConfigError(f"{path}:{error.line}: not valid TOML: {error}") from None
    servers = document.get("mcp_servers")
    if servers is None:
        servers = tomlkit.table(is_super_table=True)
        document["mcp_servers"] = servers
    elif not isinstance(servers, dict):
        raise ConfigError(f"{path}: mcp_servers is not a table")
    if document.unwrap().get("mcp_servers", {}).get(SERVER_NAME) == entry:
        return None, snippet
    table = tomlkit.table()
    for key, value in entry.items():
        table[key] = value
    servers[SERVER_NAME] = table
    return tomlkit.dumps(document), snippet


__all__ = ["CLIS", "SERVER_NAME", "default_path", "install", "powers"]
