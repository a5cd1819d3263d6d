"""Check commands run by the watcher (``app.act.cycle.checks``) with real processes: a child that
escapes with ``setsid`` and keeps the output pipe open, one that clears its environment too, one
that never stops printing, cancelling, closing, and what an earlier watcher left behind.

"Nothing left" is read from /proc: no process of this user carries the store's check marker,
and the pids the checks wrote down are gone.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path

import pytest

from app.act.cycle.check_reaper import MARKER
from app.act.cycle.checks import CHECK_WORKERS, Check, CheckRunner, store_tag
from tests.support.processes import ESCAPE, HUNG, marked_processes, pids_in, running
from tests.support.waiting import retry_until

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="the process tree is read from /proc")


def result(future: Future[Check], seconds: float = 30) -> Check:
    return future.result(timeout=seconds)


@pytest.fixture
def tag(tmp_path: Path) -> str:
    return store_tag(tmp_path)


@pytest.fixture
def runner(tag: str) -> Iterator[CheckRunner]:
    runner = CheckRunner(timeout_s=600, output_chars=500, tag=tag)
    yield runner
    runner.close()


def test_a_child_that_escapes_with_setsid_ends_with_the_check_not_at_eof(
        runner: CheckRunner, tag: str, tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    command = f"{ESCAPE} echo $! >> {pids}; echo checked; exit 0"
    code, output = result(runner.submit(1, command, str(tmp_path)))
    assert (code, output.strip()) == (0, "checked")
    [escaped] = pids_in(pids)
    assert not running(escaped)
    assert marked_processes(tag) == []


def test_a_hung_check_with_escaped_children_stops_at_its_deadline_and_leaves_nothing(
        tag: str, tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    runner = CheckRunner(timeout_s=3.0, output_chars=500, tag=tag)
    # One escapes with setsid, one also clears its environment (no marker), and one is
    # double-forked so that its parent is gone: the reaper's tree still holds them all.
    command = (f"echo started; {ESCAPE} echo $! >> {pids}; "
               f"setsid env -i sh -c 'echo $$ >> {pids}; exec {HUNG}' & "
               f"(sh -c '{HUNG} & echo $! >> {pids}' &); {HUNG}")
    try:
        future = runner.submit(1, command, str(tmp_path))
        retry_until(lambda: len(pids_in(pids)) == 3, 20)
        assert all(running(pid) for pid in pids_in(pids))
        code, output = result(future)
    finally:
        runner.close()
    assert code is None
    assert output.startswith("started") and output.endswith("[stopped after 3s]")
    assert [pid for pid in pids_in(pids) if running(pid)] == []
    assert marked_processes(tag) == []


def test_a_check_that_never_stops_printing_keeps_a_bounded_tail_and_is_stopped(
        tag: str, tmp_path: Path) -> None:
    runner = CheckRunner(timeout_s=600, output_chars=300, tag=tag,
                         max_output_bytes=2 * 1024 * 1024)
    try:
        code, output = result(runner.submit(1, f"{ESCAPE} yes conductor", str(tmp_path)))
    finally:
        runner.close()
    text, _, note = output.rpartition("\n")
    assert code is None and note == "[stopped: more than 2,097,152 bytes of output]"
    assert len(text) <= 300 and set(text.split()) == {"conductor"}
    assert marked_processes(tag) == []


def test_a_long_output_that_ends_keeps_its_tail_and_the_exit_status(
        runner: CheckRunner, tmp_path: Path) -> None:
    code, output = result(runner.submit(1, "seq 1 200000; exit 3", str(tmp_path)))
    assert code == 3 and len(output) <= 500
    assert output.split()[-2:] == ["199999", "200000"]


def test_the_check_gets_no_llm_key_and_its_own_marker(
        runner: CheckRunner, tag: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENROUTER_API_KEY", "sk-or-v1-secret")
    monkeypatch.setenv(MARKER, "inherited-from-elsewhere")
    code, output = result(runner.submit(
        7, f'echo "key=${{OPENROUTER_API_KEY:-none}} marker=${MARKER}"; pwd', str(tmp_path)))
    first, cwd = output.strip().split("\n")
    assert code == 0 and cwd == str(tmp_path)
    key, marker = first.split()
    assert key == "key=none"
    assert marker.startswith(f"marker={tag}:{os.getpid()}:7:")


def test_cancel_kills_a_running_check_and_drops_a_queued_one(
        runner: CheckRunner, tag: str, tmp_path: Path) -> None:
    ran = tmp_path / "ran"
    running_checks = [runner.submit(n, f"echo {n} >> {ran}; {ESCAPE} {HUNG}", str(tmp_path))
                      for n in range(CHECK_WORKERS)]
    queued = runner.submit(99, f"echo 99 >> {ran}", str(tmp_path))
    retry_until(lambda: len(pids_in(ran)) == CHECK_WORKERS, 20)
    runner.cancel(99)
    runner.cancel(0)
    code, output = result(running_checks[0])
    assert code is None and output.endswith("\n[stopped: the cycle ended]")
    assert queued.cancelled()
    for n in range(1, CHECK_WORKERS):
        runner.cancel(n)
        assert result(running_checks[n])[0] is None
    assert 99 not in pids_in(ran)
    assert marked_processes(tag) == []


def test_close_ends_every_check_and_a_later_one_never_runs(
        runner: CheckRunner, tag: str, tmp_path: Path) -> None:
    ran = tmp_path / "ran"
    futures = [runner.submit(n, f"echo {n} >> {ran}; {ESCAPE} {HUNG}", str(tmp_path))
               for n in range(CHECK_WORKERS)]
    retry_until(lambda: len(pids_in(ran)) == CHECK_WORKERS, 20)
    runner.close()
    assert marked_processes(tag) == []
    for future in futures:
        code, output = result(future)
        assert code is None and output.endswith("\n[stopped: the watcher is stopping]")
    assert result(runner.submit(9, f"echo 9 >> {ran}", str(tmp_path))) == \
        (None, "[not run: the watcher is stopping]")
    assert 9 not in pids_in(ran)


def test_what_an_earlier_watchers_checks_left_is_killed_at_start(
        tag: str, tmp_path: Path) -> None:
    # A check process of a watcher that died with SIGKILL, reaper and all: same store, other pid.
    env = {**os.environ, MARKER: f"{tag}:1:5:abcd"}
    orphan = subprocess.Popen(["sleep", "100000"], env=env, start_new_session=True)
    other = subprocess.Popen(["sleep", "100000"], start_new_session=True,
                             env={**os.environ, MARKER: f"{store_tag(tmp_path / 'x')}:1:5:ab"})
    try:
        retry_until(lambda: marked_processes(tag) == [orphan.pid], 10)
        CheckRunner(timeout_s=1, output_chars=100, tag=tag).close()
        assert orphan.wait(timeout=10) == -9
        assert other.poll() is None  # another store's check is not ours to end
    finally:
        for proc in (orphan, other):
            proc.kill()
            proc.wait()
