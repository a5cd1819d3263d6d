"""``hooks install --host`` against a real sshd on loopback (tests/hosts/sshd.py) with hostile
and odd settings files there: a symlink is followed and stays, bytes that are not UTF-8 and
values that could not be written back are refused before any backup, a FIFO is refused without
waiting on it, and the new file is staged under a name of its own, never through one planted."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable
from pathlib import Path

import pytest

from app.install.remote_hooks import hook_line
from tests.conftest import conductor
from tests.hosts.conftest import ssh_host, write_hosts  # noqa: F401  # ssh_host: a fixture
from tests.hosts.sshd import SshHost

pytestmark = pytest.mark.slow  # an sshd per test


@pytest.fixture
def host(ssh_host: Callable[[str], SshHost], tmp_path: Path) -> SshHost:  # noqa: F811
    alpha = ssh_host("alpha")
    write_hosts(tmp_path / "config.toml", alpha)
    return alpha


def install_on(path: Path) -> tuple[int, str, str]:
    done = conductor("pty", "hooks", "install", "--cli", "claude", "--host", "alpha", "--path",
                     str(path), timeout=60)
    return done.returncode, done.stdout, done.stderr


def others(folder: Path, *names: str) -> list[str]:
    """What else is in the folder: backups, staged files."""
    return sorted(e.name for e in folder.iterdir() if e.name not in names)


def test_a_symlink_stays_and_the_file_it_names_changes_keeping_its_mode(
        host: SshHost, tmp_path: Path) -> None:
    real = tmp_path / "dotfiles" / "claude.json"
    real.parent.mkdir()
    real.write_text(json.dumps({"theme": "dark", "note": "caf\u00e9"}), encoding="utf-8")
    real.chmod(0o640)
    link = tmp_path / "settings.json"
    link.symlink_to(real)
    code, out, err = install_on(link)
    assert code == 0, err
    assert f"alpha:{real}" in out and "backup" in out
    assert link.is_symlink() and link.resolve() == real
    written = json.loads(real.read_text(encoding="utf-8"))
    assert (written["theme"], written["note"]) == ("dark", "caf\u00e9")
    assert written["hooks"]["Stop"][0]["hooks"][0]["command"] == hook_line("claude", "Stop")
    assert stat.S_IMODE(real.stat().st_mode) == 0o640
    [backup] = others(real.parent, "claude.json")
    assert backup.startswith("claude.json.conductor-backup-")
    assert json.loads((real.parent / backup).read_text(encoding="utf-8"))["theme"] == "dark"


@pytest.mark.parametrize(("data", "message"), [
    (b'{"theme": "caf\xe9"}', "not UTF-8 (byte 0xe9 at offset 14); nothing changed"),
    (b'{"a": 1e400}', "the number 1e400 is too large to keep"),
    (b'{"a": "\\ud800"}', "holds a lone surrogate (U+D800)"),
], ids=["latin-1 byte", "1e400", "lone surrogate"])
def test_what_could_not_be_written_back_is_refused_before_any_backup(
        host: SshHost, tmp_path: Path, data: bytes, message: str) -> None:
    path = tmp_path / "settings.json"
    path.write_bytes(data)
    code, out, err = install_on(path)
    assert (code, out) == (1, "")
    assert err == f"Error: alpha:{path}: {err.split(': ', 2)[2]}" and message in err
    assert err.count("\n") == 1
    assert path.read_bytes() == data and others(tmp_path, "settings.json", "config.toml",
                                                "host-alpha", "client_key",
                                                "client_key.pub", "sockets") == []


def test_a_fifo_is_refused_without_waiting_on_it(host: SshHost, tmp_path: Path) -> None:
    fifo = tmp_path / "settings.json"
    os.mkfifo(fifo)
    code, out, err = install_on(fifo)
    assert (code, out) == (1, "")
    assert err == f"Error: host alpha: {fifo} is not a regular file; nothing changed\n"
    assert stat.S_ISFIFO(fifo.lstat().st_mode)


def test_the_new_file_is_staged_under_a_name_of_its_own(host: SshHost, tmp_path: Path) -> None:
    path = tmp_path / "claude" / "settings.json"
    path.parent.mkdir()
    path.write_text('{"theme": "dark"}', encoding="utf-8")
    victim = tmp_path / "victim"
    victim.write_text("keep me", encoding="utf-8")
    # The name the install used to stage through, and to back up to, planted as links.
    (path.parent / "settings.json.conductor-new").symlink_to(victim)
    code, _, err = install_on(path)
    assert code == 0, err
    assert victim.read_text(encoding="utf-8") == "keep me"
    assert not path.is_symlink() and "Stop" in json.loads(path.read_text())["hooks"]
    left = others(path.parent, "settings.json", "settings.json.conductor-new")
    assert len(left) == 1 and left[0].startswith("settings.json.conductor-backup-")
