"""Fixtures the watcher's tests share."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from app.adapters.control import ControlMode
from app.adapters.tmux import Tmux


@pytest.fixture
def control(server: Any) -> Iterator[tuple[ControlMode, threading.Event]]:
    """Control mode on the test's tmux server, and the event it sets when it has news."""
    woken = threading.Event()
    mode = ControlMode(Tmux(socket_name=server.socket_name), woken.set)
    yield mode, woken
    mode.close()
