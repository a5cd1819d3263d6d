"""A host is untrusted input: what its tmux reports is read strictly, and nothing it writes
makes us log a traceback (real sshd on loopback, our real control-mode client over it)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from app.adapters.control import HOOK_OPTION, ControlMode
from app.adapters.ssh import HostConfig
from tests.hosts.sshd import SshHost
from tests.support.waiting import retry_until


def test_a_remote_hook_value_with_non_ascii_digits_is_read_without_a_traceback(
        ssh_host: Callable[[str], SshHost], monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    alpha = ssh_host("alpha")
    assert alpha.tmux("new-session", "-d", "-s", "work", "cat").returncode == 0
    crashed: list[Any] = []
    monkeypatch.setattr(threading, "excepthook", crashed.append)
    config = HostConfig("alpha", "alpha", tuple(alpha.ssh_options))
    control = ControlMode(config.tmux())
    heard: list[tuple[str, str, float]] = []

    def hears(value: str) -> bool:
        heard.extend(control.take_hooks())
        return any(v.endswith(value) for _, v, _ in heard)

    try:
        control.follow({"$0"})
        retry_until(lambda: control.watching() == {"$0"}, 30, interval=0.1)
        # "²" is a digit to str.isdigit() and not a number to int(): the stamp of a hook line.
        later = int(time.time()) + 60  # a stamp after our client attached: news
        for value in (f"claude Stop 1 {later}", "claude Stop 7 ²", f"claude Stop ²³ {later}",
                      f"claude Stop 8 {later}"):
            assert alpha.tmux("set-option", "-p", "-t", "%0", HOOK_OPTION,
                              value).returncode == 0
            retry_until(lambda v=value: hears(v), 30, interval=0.1)  # type: ignore[misc]
    finally:
        control.close()
        config.via().close()
    assert crashed == []
    assert not [r for r in caplog.records if r.exc_info]
