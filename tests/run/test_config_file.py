"""The config file: created with every default, upgraded in place, refused with one clear line."""

from __future__ import annotations

import dataclasses
import logging
import os
import stat
import sys
from pathlib import Path
from typing import NamedTuple

import pytest
import tomlkit
from tomlkit.items import Comment, Table

from app.adapters.llm import LLMSettings
from app.adapters.notify_settings import COMMAND, DESKTOP, TMUX, NotifySettings
from app.base import settings
from app.base.errors import ConfigError
from app.base.model import State
from app.base.settings import DEFAULT_WAIT_POLL_S, WatchSettings, config_path
from app.run.configfile import DEFAULT_DOCUMENT, McpSettings, load_config

NEEDS = State.NEEDS_CONFIRMATION

# What a user had before the config grew [states], [llm], [wait] and the per-kind tables.
OLD_CONFIG = """\
# my conductor settings
[watch]
interval = 2  # my comment

[notify]
# fewer pings while I work
min_interval = 30
"""


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "conductor-pty" / "config.toml"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def lines_in_order(old: str, new: str) -> bool:
    rest = iter(new.splitlines())
    return all(any(line == n for n in rest) for line in old.splitlines())


# --- defaults -----------------------------------------------------------------------------------


def test_missing_file_is_created_with_every_default(path: Path) -> None:
    cfg = load_config(path)
    assert cfg.created
    assert cfg.added == ()
    assert path.read_text(encoding="utf-8") == DEFAULT_DOCUMENT
    assert (cfg.path, cfg.watch, cfg.notify) == (path, WatchSettings(), NotifySettings())

    again = load_config(path)
    assert (again.created, again.added) == (False, ())
    assert again == dataclasses.replace(cfg, created=False)


def test_no_file_and_no_upgrade_means_defaults_and_nothing_written(path: Path) -> None:
    cfg = load_config(path, upgrade=False)
    assert not cfg.created
    assert not path.exists()
    assert not path.parent.exists()
    assert cfg.watch == WatchSettings()


def test_default_document_is_the_code_defaults(path: Path) -> None:
    cfg = load_config(path, upgrade=False)
    assert cfg.watch == WatchSettings()
    assert cfg.notify == NotifySettings()
    assert cfg.llm_defaults == LLMSettings()
    assert cfg.wait_poll_s == DEFAULT_WAIT_POLL_S
    doc = tomlkit.parse(DEFAULT_DOCUMENT)
    assert doc["watch"]["interval"] == settings.DEFAULT_INTERVAL_S
    assert doc["states"]["ready_polls"] == 0
    assert settings.DEFAULT_STABLE_POLLS is None  # 0 in the file stands for "the pack's own"
    assert "api_key" not in DEFAULT_DOCUMENT


def test_every_default_key_has_a_comment_above_it() -> None:
    def check(table: Table | tomlkit.TOMLDocument, prefix: str) -> int:
        body = table.value.body if isinstance(table, Table) else table.body
        seen = 0
        previous: object = None
        for key, item in body:
            if key is not None and isinstance(item, Table):
                seen += check(item, f"{prefix}{key.key}.")
            elif key is not None:
                assert isinstance(previous, Comment), f"{prefix}{key.key} has no comment"
                seen += 1
            previous = item
        return seen

    assert check(tomlkit.parse(DEFAULT_DOCUMENT), "") == 57


def test_ready_polls_zero_means_each_packs_own(path: Path) -> None:
    write(path, "[states]\nready_polls = 0\n")
    assert load_config(path).watch.stable_polls is None
    write(path, "[states]\nready_polls = 4\n")
    assert load_config(path).watch.stable_polls == 4


def test_config_path_precedence(tmp_path: Path) -> None:
    home = str(tmp_path / "home")
    assert config_path({"HOME": home}) == Path(home, ".config/conductor-pty/config.toml")
    assert config_path({"HOME": home, "XDG_CONFIG_HOME": "/xdg"}) == Path(
        "/xdg/conductor-pty/config.toml"
    )
    # A relative XDG_CONFIG_HOME is invalid by the spec and ignored.
    assert config_path({"HOME": home, "XDG_CONFIG_HOME": "rel"}).parent.parent == Path(
        home, ".config"
    )
    explicit = {"HOME": home, "XDG_CONFIG_HOME": "/xdg", "CONDUCTOR_CONFIG": "/etc/c.toml"}
    assert config_path(explicit) == Path("/etc/c.toml")


def test_env_names_the_file(tmp_path: Path) -> None:
    target = write(tmp_path / "elsewhere.toml", "[watch]\ninterval = 9\n")
    assert load_config(env={"CONDUCTOR_CONFIG": str(target)}).watch.interval_s == 9.0


# --- upgrading ----------------------------------------------------------------------------------


def test_config_from_before_this_change_loads_gains_new_keys_and_keeps_the_users(
    path: Path,
) -> None:
    write(path, OLD_CONFIG)
    cfg = load_config(path)

    # The user's values win; everything else is a default.
    assert cfg.watch.interval_s == 2.0
    assert cfg.notify.min_interval == 30.0
    assert cfg.watch.force_capture_s == settings.DEFAULT_FORCE_CAPTURE_S
    assert cfg.wait_poll_s == DEFAULT_WAIT_POLL_S
    assert "watch.interval" not in cfg.added
    assert "notify.min_interval" not in cfg.added
    assert {"watch.history_days", "states.busy_polls", "notify.tmux.states", "llm.model",
            "wait.poll_interval"} <= set(cfg.added)
    assert not cfg.created

    text = path.read_text(encoding="utf-8")
    # Every line the user wrote is still there, in order, comments included...
    assert lines_in_order(OLD_CONFIG, text)
    assert text.startswith("# my conductor settings\n[watch]\ninterval = 2  # my comment\n")
    assert "# fewer pings while I work\nmin_interval = 30\n" in text
    # ...each new key sits in its own table, with the comment it has in the default document...
    watch = text[text.index("[watch]"):text.index("[notify]")]
    assert "# Days of history kept.\nhistory_days = 7.0\n" in watch
    notify = text[text.index("[notify]"):text.index("[notify.tmux]")]
    assert "skip_focused = false" in notify
    assert "[wait]\n# Seconds between two looks at the pane by `conductor pty wait`.\n" in text
    # ...no version field, and the file now holds every key.
    assert "version" not in text
    assert tomlkit.parse(text).unwrap() == tomlkit.parse(DEFAULT_DOCUMENT).unwrap() | {
        "watch": {**tomlkit.parse(DEFAULT_DOCUMENT).unwrap()["watch"], "interval": 2},
        "notify": {**tomlkit.parse(DEFAULT_DOCUMENT).unwrap()["notify"], "min_interval": 30},
    }

    # A second load finds nothing to add and does not touch the file.
    before = path.stat().st_mtime_ns
    again = load_config(path)
    assert again.added == ()
    assert path.read_text(encoding="utf-8") == text
    assert path.stat().st_mtime_ns == before
    assert (again.watch, again.notify) == (cfg.watch, cfg.notify)


def test_new_keys_go_into_the_users_own_sub_table(path: Path) -> None:
    write(path, "[notify.tmux]\nenabled = false  # too noisy\n")
    cfg = load_config(path)
    assert cfg.notify.kinds == {DESKTOP, COMMAND}
    text = path.read_text(encoding="utf-8")
    tmux = text[text.index("[notify.tmux]"):text.index("[notify.desktop]")]
    assert tmux.startswith("[notify.tmux]\nenabled = false  # too noisy\n")
    assert "states = []" in tmux
    assert tomlkit.parse(text)["notify"]["tmux"]["enabled"] is False


def test_a_complete_file_is_never_written(path: Path) -> None:
    write(path, DEFAULT_DOCUMENT.replace("interval = 5.0", "interval = 1.0  # fast"))
    path.chmod(0o600)
    before = path.stat()
    assert load_config(path).added == ()
    after = path.stat()
    assert (after.st_mtime_ns, after.st_ino) == (before.st_mtime_ns, before.st_ino)


def test_upgrade_keeps_the_file_mode_and_a_symlink(tmp_path: Path) -> None:
    real = write(tmp_path / "dotfiles" / "conductor.toml", OLD_CONFIG)
    real.chmod(0o640)
    link = tmp_path / "config" / "config.toml"
    link.parent.mkdir()
    link.symlink_to(real)
    assert load_config(link).added
    assert link.is_symlink()
    assert stat.S_IMODE(real.stat().st_mode) == 0o640
    assert "[wait]" in real.read_text(encoding="utf-8")
    assert [p.name for p in real.parent.iterdir()] == ["conductor.toml"]  # no temp file left


def test_read_only_file_still_loads(path: Path, caplog: pytest.LogCaptureFixture) -> None:
    write(path, OLD_CONFIG)
    path.chmod(0o444)
    with caplog.at_level(logging.WARNING, logger="app.run.configfile"):
        cfg = load_config(path)
    assert (cfg.watch.interval_s, cfg.notify.min_interval) == (2.0, 30.0)
    assert cfg.watch.error_polls == settings.DEFAULT_ERROR_POLLS
    assert cfg.added == ()
    assert path.read_text(encoding="utf-8") == OLD_CONFIG
    assert "read-only" in caplog.text
    assert str(path) in caplog.text


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="uses /proc")
def test_a_file_that_cannot_be_created_means_defaults(caplog: pytest.LogCaptureFixture) -> None:
    # Nobody, root included, can make a folder in /proc.
    path = Path("/proc/conductor-pty-test/config.toml")
    with caplog.at_level(logging.WARNING, logger="app.run.configfile"):
        cfg = load_config(path)
    assert not cfg.created
    assert cfg.watch == WatchSettings()
    assert "could not create config file /proc/conductor-pty-test/config.toml" in caplog.text


def test_inline_tables_are_not_rewritten(path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # Adding keys would rewrite the user's line, so the file stays as it is.
    text = "notify = { min_interval = 3 }  # short\n"
    write(path, text)
    with caplog.at_level(logging.WARNING, logger="app.run.configfile"):
        cfg = load_config(path)
    assert cfg.notify.min_interval == 3.0
    assert cfg.added == ()
    assert path.read_text(encoding="utf-8") == text
    assert "could not add" in caplog.text


# --- values -------------------------------------------------------------------------------------


def test_every_section_maps_onto_the_settings(path: Path) -> None:
    write(
        path,
        """\
[watch]
interval = 1
force_capture = 12.5
history_rows = 50
history_days = 0.5

[states]
ready_polls = 3
ready_min_seconds = 0
busy_polls = 2
confirmation_polls = 3
error_polls = 4
waiting_grace = 60
send_grace = 1.5

[notify]
states = ["error"]
min_interval = 0
skip_focused = true
timeout = 2

[notify.tmux]
enabled = false

[notify.desktop]
states = ["NEEDS_CONF", "ERROR"]

[notify.command]
argv = ["/usr/bin/my hook", "--when", "$STATE; rm"]
states = ["READY"]

[llm]
model = "google/gemini-2.5-flash-lite"
base_url = "http://127.0.0.1:9/api/v1/"
timeout = 4
calls_per_minute = 7
max_screen_chars = 900
exclude = ["%3", "secrets:*"]

[wait]
poll_interval = 0.25
""",
    )
    cfg = load_config(path)
    assert cfg.watch == WatchSettings(
        interval_s=1.0,
        stable_polls=3,
        history_rows_per_pane=50,
        history_days=0.5,
        force_capture_s=12.5,
        busy_polls=2,
        confirmation_polls=3,
        error_polls=4,
        ready_min_s=0.0,
        waiting_grace_s=60.0,
        send_grace_s=1.5,
    )
    n = cfg.notify
    assert n.kinds == {DESKTOP, COMMAND}
    assert (n.min_interval, n.skip_focused, n.timeout) == (0.0, True, 2.0)
    assert n.states_for(TMUX) == {State.ERROR}
    assert n.states_for(DESKTOP) == {NEEDS, State.ERROR}
    assert n.states_for(COMMAND) == {State.READY}
    # argv exactly as written: no shell ever sees it.
    assert n.notify_command == ("/usr/bin/my hook", "--when", "$STATE; rm")
    assert cfg.llm_defaults == LLMSettings(
        model="google/gemini-2.5-flash-lite",
        base_url="http://127.0.0.1:9/api/v1",
        timeout=4.0,
        calls_per_minute=7,
        max_screen_chars=900,
        exclude=("%3", "secrets:*"),
    )
    assert cfg.wait_poll_s == 0.25


def test_mcp_send_to_names_panes_by_id_name_or_glob(path: Path) -> None:
    assert load_config(path, upgrade=False).mcp == McpSettings(send_to=())
    write(path, '[mcp]\nsend_to = [" reviewer ", "%7", "build-*"]\n')
    mcp = load_config(path).mcp
    assert mcp.send_to == ("reviewer", "%7", "build-*")
    assert mcp.may_send("w1a2b3", "%9", "reviewer")
    assert mcp.may_send("w1a2b3", "%7", "other")
    assert mcp.may_send("w1a2b3", "%9", "build-linux")
    assert not mcp.may_send("w1a2b3", "%70", "reviewers")
    assert not McpSettings().may_send("w1a2b3", "%7", "reviewer")


def test_allowed_checks_are_kept_as_exact_commands(path: Path) -> None:
    write(path, '[cycle]\nallowed_checks = ["pytest -q", "  make test  "]\n')
    assert load_config(path).cycle.allowed_checks == ("pytest -q", "make test")
    assert load_config(path.with_name("none.toml"), upgrade=False).cycle.allowed_checks == ()


def test_environment_wins_over_the_file_for_the_llm(path: Path) -> None:
    write(path, '[llm]\nmodel = "file/model"\ntimeout = 4.0\nexclude = ["%1"]\n')
    defaults = load_config(path).llm_defaults
    from_file = LLMSettings.from_env({}, defaults=defaults)
    assert (from_file.model, from_file.timeout, from_file.exclude) == ("file/model", 4.0, ("%1",))
    assert not from_file.enabled
    env = {"OPENROUTER_API_KEY": "sk-or-v1-test", "CONDUCTOR_LLM_MODEL": "env/model",
           "CONDUCTOR_LLM_EXCLUDE": "%9"}
    both = LLMSettings.from_env(env, defaults=defaults)
    assert (both.model, both.timeout, both.exclude) == ("env/model", 4.0, ("%9",))
    assert both.enabled


# --- errors -------------------------------------------------------------------------------------


class Bad(NamedTuple):
    id: str
    text: str
    message: str  # what the one line says after "<path>: " (or "<path>:<line>:<col>: ")


BAD = [
    Bad("syntax", "[watch]\ninterval = \n", ":2:12: invalid TOML: Unexpected character"),
    Bad("text-for-whole", '[states]\nbusy_polls = "x"\n',
        ": states.busy_polls must be a whole number ≥ 1, got 'x'"),
    Bad("zero-polls", "[states]\nbusy_polls = 0\n",
        ": states.busy_polls must be a whole number ≥ 1, got 0"),
    Bad("fraction-for-whole", "[watch]\nhistory_rows = 10.5\n",
        ": watch.history_rows must be a whole number ≥ 1, got 10.5"),
    Bad("bool-for-number", "[watch]\ninterval = true\n",
        ": watch.interval must be a number > 0, got True"),
    Bad("nan", "[watch]\ninterval = nan\n", ": watch.interval must be a number > 0, got nan"),
    Bad("negative", "[states]\nwaiting_grace = -1\n",
        ": states.waiting_grace must be a number ≥ 0, got -1"),
    Bad("llm-range", "[llm]\ncalls_per_minute = 0\n",
        ": llm.calls_per_minute must be a whole number from 1 to 10000, got 0"),
    Bad("not-bool", '[notify]\nskip_focused = "yes"\n',
        ": notify.skip_focused must be true or false, got 'yes'"),
    Bad("unknown-key", "[notify]\nfoo = 1\n", ": unknown key notify.foo"),
    Bad("unknown-table", "[notfy]\nmin_interval = 1\n", ": unknown key notfy.min_interval"),
    Bad("unknown-state", '[notify.desktop]\nstates = ["READY", "SLEEPY"]\n',
        ": notify.desktop.states: unknown state 'SLEEPY'"),
    Bad("string-command", '[notify.command]\nargv = "notify-me --urgent"\n',
        ": notify.command.argv must be a list of strings, got 'notify-me --urgent'"),
    Bad("value-for-table", "notify = 3\n", ": notify must be a table, got 3"),
    Bad("table-for-value", "[notify.states]\nready = true\n",
        ": notify.states must be a list of strings, not a table"),
    Bad("url", '[llm]\nbase_url = "openrouter.ai"\n',
        ": llm.base_url must start with http:// or https://, got 'openrouter.ai'"),
    Bad("send-to-string", '[mcp]\nsend_to = "reviewer"\n',
        ": mcp.send_to must be a list of strings, got 'reviewer'"),
    Bad("send-to-number", "[mcp]\nsend_to = [7]\n",
        ": mcp.send_to must be a list of strings, got [7]"),
    Bad("send-to-empty", '[mcp]\nsend_to = ["reviewer", " "]\n',
        ": mcp.send_to must list pane names or ids, got an empty one"),
    Bad("mcp-unknown", "[mcp]\nwait_on = []\n", ": unknown key mcp.wait_on"),
    Bad("allowed-check-nul", '[cycle]\nallowed_checks = ["pytest -q", "make\\u0000test"]\n',
        ": cycle.allowed_checks: entry 2 holds a NUL (U+0000 at position 4)"),
    Bad("allowed-check-empty", '[cycle]\nallowed_checks = ["  "]\n',
        ": cycle.allowed_checks: entry 1 is empty"),
    Bad("allowed-check-long", f'[cycle]\nallowed_checks = ["{"x" * 1001}"]\n',
        ": cycle.allowed_checks: entry 1 is too long (1001 characters, at most 1000)"),
    Bad("allowed-check-string", '[cycle]\nallowed_checks = "pytest"\n',
        ": cycle.allowed_checks must be a list of strings, got 'pytest'"),
]


@pytest.mark.parametrize("case", BAD, ids=[c.id for c in BAD])
def test_a_bad_file_is_one_line_naming_it_and_is_never_written(path: Path, case: Bad) -> None:
    write(path, case.text)
    before = path.stat().st_mtime_ns
    with pytest.raises(ConfigError) as err:
        load_config(path)
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith(f"{path}{case.message}"), message
    assert path.read_text(encoding="utf-8") == case.text
    assert path.stat().st_mtime_ns == before


def test_a_key_given_twice_names_the_line(path: Path) -> None:
    write(path, "[watch]\ninterval = 1\ninterval = 2\n")
    # tomlkit gives no position for this one; Python 3.11's tomllib finds it.
    where = ":3:13" if sys.version_info >= (3, 11) else ""
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert str(err.value) == f'{path}{where}: invalid TOML: Key "interval" already exists.'


def test_api_key_in_the_file_is_refused_and_never_repeated(path: Path) -> None:
    secret = "sk-or-v1-0123456789abcdef"
    text = f'[llm]\nmodel = "m/x"\napi_key = "{secret}"\n'
    write(path, text)
    with pytest.raises(ConfigError) as err:
        load_config(path)
    message = str(err.value)
    assert message.startswith(f"{path}: llm.api_key is not read from the config file")
    assert "environment" in message
    assert "OPENROUTER_API_KEY" in message
    assert secret not in message
    assert path.read_text(encoding="utf-8") == text


def test_unreadable_file_is_an_error(path: Path) -> None:
    path.mkdir(parents=True)  # a folder where the file should be
    with pytest.raises(ConfigError, match=f"^{path}: cannot read the config file"):
        load_config(path)
    path.rmdir()
    path.write_bytes(b"[watch]\ninterval = 1 # \xff\n")
    with pytest.raises(ConfigError, match=f"^{path}: cannot read the config file"):
        load_config(path)


def test_created_file_mode_is_readable(path: Path) -> None:
    load_config(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert os.access(path, os.R_OK)
