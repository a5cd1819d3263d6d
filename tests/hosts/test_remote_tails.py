"""Usage files on another host, read over its ssh connection (app.adapters.remote_tails) with a
real sshd on loopback: one call for all of a host's files, hostile paths kept as data, files
that are missing, a FIFO, a link, replaced, cut or holding NUL bytes, and the byte limits; then
what a host could print instead of our frames."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

from app.adapters.remote_tails import Grown, RemoteTails, parse_frames, read_grown
from app.adapters.ssh import HostConfig, SshVia
from app.adapters.usage_files import Tail
from app.base.errors import HostUnreachable, TmuxError
from tests.hosts.sshd import SshHost

pytestmark = pytest.mark.slow  # an sshd per test


class CountingVia:
    """An SshVia that counts the ssh command lines it makes (each one is an ssh process)."""

    def __init__(self, via: SshVia) -> None:
        self.via = via
        self.calls = 0

    @property
    def host(self) -> str:
        return self.via.host

    def wrap(self, argv: Sequence[str]) -> list[str]:
        self.calls += 1
        return self.via.wrap(argv)

    def failure(self, returncode: int, stderr: str) -> TmuxError | None:
        return self.via.failure(returncode, stderr)


def _claude(message_id: str, inp: int, out: int) -> str:
    return json.dumps({"type": "assistant", "timestamp": "2026-11-28T02:31:00.000Z",
                       "message": {"id": message_id, "model": "claude-opus-4-5",
                                   "usage": {"input_tokens": inp, "output_tokens": out}}}) + "\n"


@pytest.fixture
def alpha(ssh_host: Callable[[str], SshHost]) -> Iterator[SshVia]:
    host = ssh_host("alpha")
    via = HostConfig("alpha", "alpha", tuple(host.ssh_options)).via()
    yield via
    via.close()


def test_every_file_of_a_host_in_one_call_hostile_names_as_data(alpha: SshVia,
                                                                tmp_path: Path) -> None:
    folder = tmp_path / "files"
    folder.mkdir()
    # Were it run, it would touch a canary in the login's folder (the host's home, in tmp_path).
    hostile = folder / "it's $(touch canary) \"q\" `touch canary` * ;x.jsonl"
    hostile.write_bytes(b"one\ntwo\nthr")
    newline = folder / "a\nb.jsonl"
    newline.write_bytes(b"nl\n")
    nul = folder / "nul.jsonl"
    nul.write_bytes(b"a\0b\n")
    link = folder / "link.jsonl"
    link.symlink_to(nul)
    fifo = folder / "fifo"
    os.mkfifo(fifo)
    ino = hostile.stat().st_ino
    asked = [(str(hostile), 0, 0), (str(newline), 0, 0), (str(nul), 0, 0), (str(link), 0, 0),
             (str(fifo), 0, 0), (str(folder / "missing"), 0, 0), (str(folder), 0, 0),
             (str(hostile), ino, 4)]
    counting = CountingVia(alpha)
    found = read_grown(counting, asked)  # an SshVia, counted
    assert counting.calls == 1
    nul_ino = nul.stat().st_ino
    assert found == [Grown(ino, 11, 0, b"one\ntwo\nthr"),
                     Grown(newline.stat().st_ino, 3, 0, b"nl\n"),
                     Grown(nul_ino, 4, 0, b"a b\n"),  # NUL ends a frame: a space, same length
                     Grown(nul_ino, 4, 0, b"a b\n"),  # a link: the file it names
                     None, None, None,  # a FIFO is not read (nor waited on), nor a folder
                     Grown(ino, 11, 4, b"two\nthr")]
    assert list(tmp_path.rglob("canary")) == []


def test_a_replaced_or_cut_file_starts_again_and_the_limits_hold(alpha: SshVia,
                                                                tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"x" * 100 + b"\n")
    ino = path.stat().st_ino
    [cut] = read_grown(alpha, [(str(path), ino, 500)])
    assert cut == Grown(ino, 101, 0, b"x" * 100 + b"\n")
    other = tmp_path / "other.jsonl"
    other.write_bytes(b"new\n")
    other.replace(path)
    [replaced] = read_grown(alpha, [(str(path), ino, 3)])
    assert replaced is not None and (replaced.start, replaced.chunk) == (0, b"new\n")
    big = tmp_path / "big.jsonl"
    big.write_bytes(b"y" * 1000)
    found = read_grown(alpha, [(str(big), 0, 0), (str(big), 0, 0), (str(big), 0, 0)],
                       max_each=400, max_call=700)
    assert [len(f.chunk) if f else None for f in found] == [400, 300, 0]


def test_usage_of_several_files_costs_one_call_each_read_caught_up_or_not(
        alpha: SshVia, tmp_path: Path) -> None:
    paths = [tmp_path / f"s{i}.jsonl" for i in range(3)]
    for i, path in enumerate(paths):
        path.write_text(_claude(f"m{i}", 10 * (i + 1), i + 1))
    tails = [Tail(str(p), "claude") for p in paths]
    counting = CountingVia(alpha)
    read = RemoteTails(counting)  # an SshVia, counted
    first = read(tails)
    assert [[(u.input, u.output) for u in found] for found in first] == [[(10, 1)], [(20, 2)],
                                                                         [(30, 3)]]
    assert [t.offset for t in tails] == [p.stat().st_size for p in paths]
    for _ in range(3):
        assert read(tails) == [[], [], []]
    with paths[1].open("a") as f:
        f.write(_claude("m1", 10, 2) + _claude("m9", 5, 6))  # m1 again: counted once
    assert [[(u.input, u.output) for u in found] for found in read(tails)] == [[], [(5, 6)], []]
    assert counting.calls == 5  # one per read, whatever the number of files
    assert read([]) == [] and counting.calls == 5  # no file: no call


def test_a_host_gone_is_unreachable_not_a_hang(ssh_host: Callable[[str], SshHost],
                                               tmp_path: Path) -> None:
    host = ssh_host("beta")
    via = HostConfig("beta", "beta", tuple(host.ssh_options)).via()
    host.stop()
    with pytest.raises(HostUnreachable):
        read_grown(via, [(str(tmp_path / "t.jsonl"), 0, 0)])


@pytest.mark.parametrize(("out", "expected"), [
    (b"", [None, None]),
    (b"1 4 0\nab\n\x00", [Grown(1, 4, 0, b"ab\n"), None]),
    (b"1 4 0\nab\n", [None, None]),  # no end of frame: not taken
    (b"1 4 5\n\x00", [None, None]),  # starts past its size
    (b"1 2 0\nabc\x00", [None, None]),  # more bytes than the file holds
    (b"1 4 0 9\n\x00", [None, None]),
    (b"-1 4 0\n\x00", [None, None]),
    (b"\xb2 4 0\n\x00", [None, None]),
    (b"missing\n\x00" + b"7 1 0\nz\x00", [None, Grown(7, 1, 0, b"z")]),
    (b"missing\nx\x00" + b"7 1 0\nz\x00", [None, None]),
], ids=["nothing", "one", "unended", "past", "longer", "fields", "sign", "digit", "missing",
        "missing-with-bytes"])
def test_what_a_host_prints_instead_of_our_frames_reads_nothing(
        out: bytes, expected: list[Grown | None]) -> None:
    assert parse_frames(out, 2, 100) == expected


def test_the_script_is_plain_posix_sh(tmp_path: Path) -> None:
    """dash (Debian's sh) runs it as bash does: no bashism slipped in."""
    from app.adapters.remote_tails import SCRIPT

    path = tmp_path / "t.jsonl"
    path.write_bytes(b"abc\n")
    for shell in ("sh", "bash", "dash"):
        done = subprocess.run([shell, "-c", SCRIPT, "sh", "10", "10", "0 0 ", str(path)],
                              capture_output=True, check=False)
        assert parse_frames(done.stdout, 1, 10) == [Grown(path.stat().st_ino, 4, 0, b"abc\n")]
